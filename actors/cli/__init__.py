"""The `geode` command line: thin client and operator commands over the control socket."""
