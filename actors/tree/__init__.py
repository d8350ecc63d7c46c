"""The supervisor tree: child specs, the root supervisor, child start-up and the daemon's serve paths."""
