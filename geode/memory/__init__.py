"""The agent's memory: MEMORY.md notes per session scope (``scopes``), loaded into the system prompt and
edited by the ``memory_save`` tool."""
