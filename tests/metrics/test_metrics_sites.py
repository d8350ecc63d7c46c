"""The recording sites a served tree test does not reach cheaply, each run in a fresh interpreter with
metrics on (prometheus_client decides multiprocess mode at import): a chat reply posted and a platform 429
(the messengers' outbox over the poller fakes), a scheduled occurrence fired late (the scheduler's driver on
a fake clock over a real store), the lane queue's depth and turns by entry (the lanes service), provider
retries and fallbacks as an adapter relays them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = """
import json
from prometheus_client import CollectorRegistry, multiprocess
reg = CollectorRegistry(); multiprocess.MultiProcessCollector(reg)
print(json.dumps([[s.name, s.labels, s.value] for f in reg.collect() for s in f.samples]))
"""
CHAT = """
import json
from geode.messengers.errors import RateLimited
from geode.protocol import lanes as lanes_msg
from tests.messengers.poller_fakes import Rig, msg
from tests.waiting import poll_for
with Rig() as rig:
    rig.translator.push(msg("100", 1, "hello there"))
    poll_for(lambda: rig.lanes.submits, 5, what="the turn")
    sub = rig.lanes.submits[0]
    rig.event(sub.turn_id, lanes_msg.TURN_STARTED)
    rig.event(sub.turn_id, lanes_msg.TURN_DONE, {"result": rig.lanes.finish(sub.turn_id, "hi!")})
    poll_for(lambda: rig.translator.posts, 5, what="the reply")
    poll_for(lambda: not rig.poller.out.state.pending, 5, what="the reply settled")
    rig.translator.fail("poll", RateLimited("too many", retry_after_s=0.5))
    poll_for(lambda: rig.poller.status.rate_limited == 1, 5, what="the 429")
"""
SCHEDULE = """
import json, sys
from pathlib import Path
from geode.home import GeodeHome
from geode.protocol.transport import LocalTransport
from geode.records.engine import RecordEngine
from geode.records.schedule_client import LedgerClient
from geode.records.service import StoreService
from geode.records.settings import StoreConfig
from tests.schedule.driver import FakeClock
from tests.schedule.test_driver import T0, FakeChat, FakeLanes, Rig, spec
home = GeodeHome(Path(sys.argv[1]) / "h").ensure()
engine = RecordEngine.for_home(home, StoreConfig()).open()
clock = FakeClock(T0)
engine.schedule.clock = lambda: clock.now().timestamp()
ledger = LedgerClient(LocalTransport({"store": StoreService(engine)}, sender="scheduler#1"), attempts=1)
rig = Rig(engine, ledger, clock, FakeLanes(), FakeChat())
d = rig.driver()
d.define(spec(every=10, overlap="allow"), declarative=True)
rig.step(d, 15)  # the +10 s instant fires 5 s late
assert len(rig.lanes.admitted) == 1
engine.close()
"""


LANES = """
import json
from prometheus_client import CollectorRegistry, multiprocess
from tests.lanes.harness import done, make, submit

def depth():
    reg = CollectorRegistry(); multiprocess.MultiProcessCollector(reg)
    return sum(s.value for f in reg.collect() for s in f.samples if s.name == "geode_lane_queue_depth")

svc, tr, store = make()
svc.worker_ready("loop-1", 1, capacity=1)
submit(svc, "t1", "S")
submit(svc, "t2", "S")
submit(svc, "t3", "T", origin="messengers")
seen = [depth()]  # t1 runs; t2 (its lane is held) and t3 (no free slot) wait
done(svc, "t1", "S", "loop-1")
seen.append(depth())
done(svc, "t2", "S", "loop-1", reason="user_cancelled")
done(svc, "t3", "T", "loop-1")
seen.append(depth())
svc.stop()
print(json.dumps(seen))
"""
RELAY = """
from geode.loop.events import relay_provider_event
from geode.providers.events import ProviderEvent
relay_provider_event(ProviderEvent(type="retry", provider="openai", model="m", attempt=1, delay_s=0.1))
relay_provider_event(ProviderEvent(type="fallback", provider="anthropic", model="a", to_model="b"))
relay_provider_event(ProviderEvent(type="fallback", provider="https://10.0.0.1/v1", model="a", to_model="b"))
"""


def _run(script: str, tmp: Path) -> tuple[list[str], list[tuple[str, dict[str, str], float]]]:
    """The script's printed lines and the page its process left in a fresh multiprocess directory."""
    metrics = tmp / "metrics"
    metrics.mkdir()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "GEODE_METRICS_DIR": str(metrics)}
    env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics)  # as `geode serve` sets both
    out = subprocess.run(
        [sys.executable, "-c", script + PAGE, str(tmp)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    return lines[:-1], [(n, labels, v) for n, labels, v in json.loads(lines[-1])]


def _page(script: str, tmp: Path) -> list[tuple[str, dict[str, str], float]]:
    return _run(script, tmp)[1]


def _value(page: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    return sum(v for n, ls, v in page if n == name and all(ls.get(k) == x for k, x in labels.items()))


def test_a_chat_reply_and_a_platform_429_are_counted(tmp_path: Path) -> None:
    page = _page(CHAT, tmp_path)
    assert _value(page, "geode_messenger_posts_total", platform="telegram", outcome="posted") == 1
    assert _value(page, "geode_messenger_posts_total") == 1
    assert _value(page, "geode_messenger_rate_limit_waits_total", platform="telegram") == 1
    assert _value(page, "geode_messenger_rate_limit_wait_seconds_total", platform="telegram") == 0.5


def test_a_late_occurrence_is_the_scheduler_lag(tmp_path: Path) -> None:
    page = _page(SCHEDULE, tmp_path)
    assert _value(page, "geode_scheduler_lag_seconds_count") == 1
    assert _value(page, "geode_scheduler_lag_seconds_sum") == 5.0
    assert _value(page, "geode_scheduler_lag_seconds_bucket", le="1.0") == 0
    assert _value(page, "geode_scheduler_lag_seconds_bucket", le="5.0") == 1


def test_lane_queue_depth_admission_waits_and_turns_through_the_lanes_service(tmp_path: Path) -> None:
    printed, page = _run(LANES, tmp_path)
    assert json.loads(printed[-1]) == [2, 1, 0]  # queued: t2 and t3; then t3; then none
    assert _value(page, "geode_turns_total", entry="cli", termination="natural") == 1
    assert _value(page, "geode_turns_total", entry="cli", termination="user_cancelled") == 1
    assert _value(page, "geode_turns_total", entry="chat", termination="natural") == 1
    assert _value(page, "geode_lane_admission_wait_seconds_count") == 3
    assert _value(page, "geode_turn_duration_seconds_count") == 3


def test_provider_retries_and_fallbacks_relayed_from_an_adapter(tmp_path: Path) -> None:
    page = _page(RELAY, tmp_path)
    assert _value(page, "geode_provider_retries_total", provider="openai") == 1
    assert _value(page, "geode_provider_fallbacks_total", provider="anthropic") == 1
    assert _value(page, "geode_provider_fallbacks_total", provider="other") == 1  # never a URL as a label
