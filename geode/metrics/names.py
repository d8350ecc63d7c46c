"""The metric names the page exports and their closed label values (a leaf: no prometheus_client), shared by
the instruments, the dashboard check and ``geode top``."""

from __future__ import annotations

TURNS = "geode_turns_total"
TURN_SECONDS = "geode_turn_duration_seconds"
MODEL_SECONDS = "geode_model_call_duration_seconds"
TOOL_CALLS = "geode_tool_calls_total"
UNCERTAIN = "geode_receipts_uncertain"
RESTARTS = "geode_child_restarts_total"
INCARNATION = "geode_child_incarnation"
QUEUE_DEPTH = "geode_lane_queue_depth"
ADMISSION_WAIT = "geode_lane_admission_wait_seconds"
POSTS = "geode_messenger_posts_total"
RATE_WAITS = "geode_messenger_rate_limit_waits_total"
RATE_WAIT_SECONDS = "geode_messenger_rate_limit_wait_seconds_total"
RETRIES = "geode_provider_retries_total"
FALLBACKS = "geode_provider_fallbacks_total"
SCHEDULER_LAG = "geode_scheduler_lag_seconds"
INTAKES = "geode_webhook_intakes_total"

# origin peer -> entry label (control is cli or mcp by the turn's mode; loop/executor peers: delegate)
ENTRIES = {"messengers": "chat", "scheduler": "schedule", "webhooks": "webhook"}
PROVIDERS = frozenset(
    {"anthropic", "openai", "google", "gemini", "openrouter", "ollama", "bedrock", "vertex"}
)
TURN_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
CALL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
WAIT_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0, 600.0)


def provider_label(provider: str) -> str:
    """A provider's name as a label: a known provider kind, else "other" (never a URL or a key)."""
    base = provider.split(":", 1)[0].strip().lower()
    return base if base in PROVIDERS else "other"
