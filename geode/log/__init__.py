"""Process logging's configuration: the ``[log]`` section (the shell sets up the files)."""
