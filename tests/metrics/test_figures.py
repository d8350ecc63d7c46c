"""`geode top`'s figures from a page: quantiles from histogram buckets, totals by label, per-minute rates."""

from __future__ import annotations

from geode.metrics import names as n
from geode.metrics.figures import Page, by_label, per_minute, quantile


def _hist(name: str, buckets: dict[str, float]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(f"{name}_bucket", (("entry", "cli"), ("le", le))): v for le, v in buckets.items()}


def test_quantile_interpolates_within_the_bucket_and_stops_at_the_last_edge() -> None:
    page = _hist(n.TURN_SECONDS, {"1.0": 50.0, "2.0": 90.0, "4.0": 100.0, "+Inf": 100.0})
    assert quantile(page, n.TURN_SECONDS, 0.5) == 1.0
    assert quantile(page, n.TURN_SECONDS, 0.7) == 1.5  # 20 of the 40 between 1 s and 2 s
    assert quantile(page, n.TURN_SECONDS, 0.95) == 3.0
    beyond = _hist(n.TURN_SECONDS, {"1.0": 1.0, "+Inf": 10.0})
    assert quantile(beyond, n.TURN_SECONDS, 0.95) == 1.0
    assert quantile({}, n.TURN_SECONDS, 0.5) is None


def test_totals_by_label_and_rates() -> None:
    before: Page = {(n.TURNS, (("entry", "cli"), ("termination", "natural"))): 4.0}
    now: Page = {
        (n.TURNS, (("entry", "cli"), ("termination", "natural"))): 10.0,
        (n.TURNS, (("entry", "chat"), ("termination", "natural"))): 2.0,
        (n.TURNS, (("entry", "cli"), ("termination", "user_cancelled"))): 1.0,
    }
    assert by_label(now, n.TURNS, "termination") == {"natural": 12.0, "user_cancelled": 1.0}
    assert per_minute(now, before, n.TURNS, 30.0) == 18.0
    assert per_minute(now, None, n.TURNS, 30.0) is None


def test_the_entry_label_of_each_origin_the_tree_uses() -> None:
    from geode.messengers.poller import ORIGIN as MESSENGERS
    from geode.metrics.record import entry_of
    from geode.sessions.modes import AUTOMATION_ORIGIN, WEBHOOKS_ORIGIN

    assert entry_of("control", "IPC") == entry_of("control", "REPL") == "cli"
    assert entry_of("control", "HEADLESS") == "mcp"
    assert entry_of(MESSENGERS, "DAEMON") == "chat"
    assert entry_of(AUTOMATION_ORIGIN, "AUTOMATION") == "schedule"
    assert entry_of(WEBHOOKS_ORIGIN, "AUTOMATION") == "webhook"
    assert entry_of("executor", "IPC") == entry_of("w1/executor", "IPC") == "delegate"  # a sub-agent's turn
    assert entry_of("compaction", "IPC") == entry_of("", "IPC") == "other"
