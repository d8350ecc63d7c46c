"""The control socket's domain: per-connection state machine, request handling and stream routing."""
