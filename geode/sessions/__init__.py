"""Session composition: the mode table and a session's limits (``modes``), ``create_session`` (``factory``), a
turn's composition (``turn_setup``), the model a session gets (``settings``) and the hooks' transcripts."""
