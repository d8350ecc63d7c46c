"""The prometheus_client objects of one process, in multiprocess mode (imported only by record.py when
metrics are on, after ``PROMETHEUS_MULTIPROC_DIR`` is set). Gauges are ``livemax``: a dead child's value
leaves the page once the supervisor marks it dead; counters and histograms of dead pids stay in the sum."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, multiprocess

from geode.metrics import names as n


class Instruments:
    """Every metric the page exports (each process builds the same set; only the ones it records show)."""

    def __init__(self) -> None:
        self.turns = Counter(
            n.TURNS, "Turns ended, by entry path and termination reason", ["entry", "termination"]
        )
        self.turn_seconds = Histogram(
            n.TURN_SECONDS, "Turn latency from submission to its end", ["entry"], buckets=n.TURN_BUCKETS
        )
        self.model_seconds = Histogram(
            n.MODEL_SECONDS,
            "Model call latency (one request, retries included)",
            ["outcome"],
            buckets=n.CALL_BUCKETS,
        )
        self.tool_calls = Counter(n.TOOL_CALLS, "Tool calls by tool and outcome", ["tool", "outcome"])
        self.uncertain = Gauge(n.UNCERTAIN, "Effect receipts in state uncertain", multiprocess_mode="livemax")
        self.restarts = Counter(n.RESTARTS, "Child restarts by the supervisor", ["child"])
        self.incarnation = Gauge(
            n.INCARNATION, "The running incarnation of each child", ["child"], multiprocess_mode="livemax"
        )
        self.queue_depth = Gauge(
            n.QUEUE_DEPTH, "Turns queued in the lanes, not yet started", multiprocess_mode="livemax"
        )
        self.admission_wait = Histogram(
            n.ADMISSION_WAIT, "Time a turn waited in its lane before it started", buckets=n.WAIT_BUCKETS
        )
        self.posts = Counter(
            n.POSTS,
            "Chat replies by platform and outcome (posted, deferred, not_sent, uncertain)",
            ["platform", "outcome"],
        )
        self.rate_waits = Counter(n.RATE_WAITS, "Messenger rate-limit waits (429 retry-after)", ["platform"])
        self.rate_wait_seconds = Counter(
            n.RATE_WAIT_SECONDS, "Seconds waited on messenger rate limits", ["platform"]
        )
        self.retries = Counter(n.RETRIES, "Model request retries by provider", ["provider"])
        self.fallbacks = Counter(n.FALLBACKS, "Model calls moved to a fallback model", ["provider"])
        self.scheduler_lag = Histogram(
            n.SCHEDULER_LAG, "Scheduled occurrences: seconds between due and fired", buckets=n.WAIT_BUCKETS
        )
        self.intakes = Counter(n.INTAKES, "Webhook deliveries by outcome", ["outcome"])

    @staticmethod
    def process_dead(pid: int) -> None:
        multiprocess.mark_process_dead(pid)
