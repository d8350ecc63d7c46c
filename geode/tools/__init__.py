"""Tools: specs and safety policies, bound plans, the authority pipeline, hooks and built-in tools."""
