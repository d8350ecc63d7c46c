"""Scheduled jobs as a pure domain: job definitions (cron / every / at), their instants in a time zone, the
occurrence ids and turn ids, the catch-up/overlap/backoff planner and the occurrence outcome vocabulary."""
