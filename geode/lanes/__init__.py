"""Lanes: the one LaneQueue of the daemon, the loop-worker pool, durable turn records and stream relay."""
