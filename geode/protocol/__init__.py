"""The message protocol: envelope, codec, error codes, transports and one catalogue module per area."""
