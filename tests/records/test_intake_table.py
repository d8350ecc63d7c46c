"""The webhook intake table in a real LMDB store (through the store service's messages, in-process): a
delivery recorded once and replayed after, the route's queue bound with its open counter, the dedupe window
on an injectable clock, idempotent retries, monotonic states, the turn index, replays, retention, a full
map refused by name with nothing half-written."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from geode.home import GeodeHome
from geode.protocol import intake as m
from geode.protocol.errors import BadRequest
from geode.protocol.transport import LocalTransport
from geode.records.engine import RecordEngine
from geode.records.intake_client import IntakeClient
from geode.records.intake_models import IntakeConflict, RecordResult, StoreFull
from geode.records.service import StoreService
from geode.records.settings import StoreConfig
from geode.webhooks.ids import body_key, check_status_token, delivery_turn_id, status_token

DAY = 86400.0


@dataclass
class Clock:
    t: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


@dataclass
class Rig:
    engine: RecordEngine
    client: IntakeClient
    clock: Clock


def make_rig(home: GeodeHome, config: StoreConfig | None = None) -> Rig:
    engine = RecordEngine.for_home(home, config).open()
    clock = Clock()
    engine.intake.clock = clock
    client = IntakeClient(LocalTransport({"store": StoreService(engine)}, sender="webhooks#1"), attempts=1)
    return Rig(engine, client, clock)


@pytest.fixture
def rig(home: GeodeHome) -> Iterator[Rig]:
    r = make_rig(home)
    try:
        yield r
    finally:
        r.engine.close()


def rec(
    rig: Rig,
    key: str,
    *,
    route: str = "github",
    window_s: float | None = None,
    queue_max: int = 10,
    body: bytes = b'{"action":"opened"}',
) -> RecordResult:
    return rig.client.record(
        route,
        key,
        window_s=window_s,
        queue_max=queue_max,
        headers={"X-GitHub-Event": "issues"},
        body=body,
        client="203.0.113.7",
    )


def test_ids_are_deterministic_bounded_and_the_status_token_is_keyed() -> None:
    turn = delivery_turn_id("github", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
    assert turn == delivery_turn_id("github", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
    assert turn.startswith("wh-github-") and len(turn) == len("wh-github-") + 24
    assert delivery_turn_id("gitlab", "72d3162e-cc78-11e3-81ab-4c9367dc0958") != turn
    assert len(delivery_turn_id("r" * 64, "d" * 300)) <= 128
    assert body_key(b"Hello, World!") == (
        "sha256-dffd6021bb2bd5b0af676290809ec3a53191dd81c7f70a4b28688a362182986f"
    )
    key = b"k" * 32
    token = status_token(key, turn)
    assert len(token) == 32 and check_status_token(key, turn, token)
    assert not check_status_token(b"x" * 32, turn, token)  # another home's key
    assert not check_status_token(key, delivery_turn_id("github", "other"), token)
    assert not check_status_token(key, turn, "") and not check_status_token(key, turn, token[:-1] + "é")


def test_a_delivery_is_recorded_once_and_every_repeat_replays_it(rig: Rig) -> None:
    first = rec(rig, "d-1", body=b"\x00\xffbinary body")
    assert not first.replayed and not first.full and first.open == 1 and first.row is not None
    row = first.row
    assert (row.route, row.delivery_id, row.dedupe_key, row.state) == ("github", "d-1", "d-1", "recorded")
    assert row.turn_id == delivery_turn_id("github", "d-1")
    assert row.body == b"\x00\xffbinary body" and row.headers == {"X-GitHub-Event": "issues"}
    assert row.client == "203.0.113.7" and row.origin == "sender" and len(row.body_sha256) == 64
    for _ in range(4):
        again = rec(rig, "d-1", body=b"a different body, same delivery id")
        assert again.replayed and again.row is not None and again.row.turn_id == row.turn_id
        assert again.row.body == b"\x00\xffbinary body" and again.open == 1
    rig.client.answered("github", "d-1", "completed", 12)
    rig.client.done("github", "d-1", "posted", "")
    late = rec(rig, "d-1")
    assert late.replayed and late.row is not None and late.row.state == "done" and late.open == 0
    assert rig.client.counts().routes == {"github": {"done": 1}}
    # the same delivery id on another route is another delivery
    other = rec(rig, "d-1", route="gitlab")
    assert not other.replayed and other.row is not None and other.row.turn_id != row.turn_id


def test_a_retry_of_the_call_that_wrote_the_row_gets_it_as_new(rig: Rig) -> None:
    def call(attempt: str) -> RecordResult:
        later = rig.engine.intake.record_later(
            "github", "d-r", window_s=None, queue_max=5, headers={}, body=b"{}", client="c", attempt=attempt
        )
        result: RecordResult = later.result(5)
        return result

    first = call("a1")
    retry = call("a1")  # the reply was lost: the same call again
    assert not first.replayed and not retry.replayed and retry.row == first.row and retry.open == 1
    other = call("a2")  # the sender's retry is another call
    assert other.replayed and other.row == first.row
    assert rig.client.counts().open == {"github": 1}


def test_the_queue_bound_counts_open_intakes_and_a_full_queue_writes_nothing(rig: Rig) -> None:
    for i in range(3):
        assert rec(rig, f"q-{i}", queue_max=3).open == i + 1
    full = rec(rig, "q-3", queue_max=3)
    assert full.full and full.row is None and full.open == 3
    assert rig.client.get("github", "q-3") is None
    assert rec(rig, "q-0", queue_max=3).replayed  # a repeat is answered even with the queue full
    rig.client.submitted("github", "q-0")
    assert rec(rig, "q-3", queue_max=3).full  # submitted is still in the queue
    rig.client.answered("github", "q-0", "completed", 5)  # its turn ended: its place is free
    taken = rec(rig, "q-3", queue_max=3)
    assert not taken.full and taken.open == 3
    rig.client.done("github", "q-1", "none", "refused at submit")  # done straight from recorded
    assert rig.client.counts().open == {"github": 2}
    assert rig.client.counts().routes == {"github": {"recorded": 2, "answered": 1, "done": 1}}
    assert {r.delivery_id for r in rig.client.open_rows()} == {"q-0", "q-2", "q-3"}  # answered is not done


def test_a_body_hash_route_dedupes_within_its_window_only(rig: Rig) -> None:
    key = body_key(b'{"ping":1}')
    first = rec(rig, key, route="uptime", window_s=3600)
    rig.clock.t += 3599
    assert rec(rig, key, route="uptime", window_s=3600).replayed
    rig.clock.t += 2  # the window has passed: the same body is a new delivery
    second = rec(rig, key, route="uptime", window_s=3600)
    assert not second.replayed and second.row is not None and first.row is not None
    assert second.row.delivery_id == f"{key}.1" and second.row.turn_id != first.row.turn_id
    assert rec(rig, key, route="uptime", window_s=3600).row == second.row  # the new one is now the fresh one
    rig.clock.t += 3601
    third = rec(rig, key, route="uptime", window_s=3600)
    assert third.row is not None and third.row.delivery_id == f"{key}.2"
    # a header route (no window) stays deduped however old its intake is
    rec(rig, "h-1")
    rig.clock.t += 20 * DAY
    assert rec(rig, "h-1").replayed


def test_states_only_move_forward_and_steps_are_idempotent(rig: Rig) -> None:
    rec(rig, "s-1")
    assert rig.client.submitted("github", "s-1").state == "submitted"
    assert rig.client.submitted("github", "s-1").state == "submitted"
    answered = rig.client.answered("github", "s-1", "completed", 42)
    assert (answered.state, answered.termination_reason, answered.answer_chars) == (
        "answered",
        "completed",
        42,
    )
    assert rig.client.answered("github", "s-1", "budget", 1) == answered  # a repeat changes nothing
    assert rig.client.submitted("github", "s-1").state == "answered"  # never backwards
    assert rig.client.counts().open == {"github": 0}
    key = "sk-" + "a" * 40
    done = rig.client.done("github", "s-1", "posted", f"sent; token={key}\nsecond line")
    assert done.state == "done" and done.delivery == "posted"
    assert key not in done.delivery_reason and "\n" not in done.delivery_reason
    assert rig.client.done("github", "s-1", "uncertain", "later") == done  # the first done stays
    assert rig.client.counts().routes == {"github": {"done": 1}}
    assert rig.client.counts().open == {"github": 0}
    with pytest.raises(IntakeConflict, match="no intake nope of route github"):
        rig.client.submitted("github", "nope")


def test_by_turn_finds_the_intake_and_replay_reruns_a_stored_delivery(rig: Rig) -> None:
    row = rec(rig, "t-1", body=b'{"n":1}').row
    assert row is not None
    assert rig.client.by_turn(row.turn_id) == row
    assert rig.client.by_turn(delivery_turn_id("github", "unknown")) is None
    rig.client.done("github", "t-1", "posted")
    again = rig.client.replay("t-1", queue_max=10)
    assert again.row is not None and not again.replayed
    assert (again.row.delivery_id, again.row.origin, again.row.replay_of) == ("t-1.replay-1", "replay", "t-1")
    assert again.row.body == b'{"n":1}' and again.row.headers == row.headers
    assert again.row.turn_id == delivery_turn_id("github", "t-1.replay-1")
    assert rig.client.replay("t-1", route="github", queue_max=10).row.delivery_id == "t-1.replay-2"  # type: ignore[union-attr]
    assert rig.client.replay("t-1", queue_max=2).full  # the replay obeys the queue bound
    rec(rig, "t-1", route="gitlab")
    with pytest.raises(IntakeConflict, match="github, gitlab: name the route"):
        rig.client.replay("t-1", queue_max=10)
    with pytest.raises(IntakeConflict, match="no stored delivery missing"):
        rig.client.replay("missing", queue_max=10)
    long_id = "L" * 256
    rec(rig, long_id)
    replayed = rig.client.replay(long_id, queue_max=10).row
    assert replayed is not None and replayed.delivery_id == f"{long_id}.replay-1"


def test_recent_lists_newest_first_without_bodies_unless_asked(rig: Rig) -> None:
    for i in range(5):
        rec(rig, f"n-{i}", route="github" if i % 2 else "stripe")
        rig.clock.t += 1
    rows = rig.client.recent(limit=3)
    assert [r.delivery_id for r in rows] == ["n-4", "n-3", "n-2"] and all(r.body == b"" for r in rows)
    assert all(r.body_sha256 for r in rows)
    assert [r.delivery_id for r in rig.client.recent("github", with_body=True)] == ["n-3", "n-1"]
    assert rig.client.recent("github", with_body=True)[0].body == b'{"action":"opened"}'


def test_bad_input_is_a_named_refusal_and_nothing_is_recorded(rig: Rig) -> None:
    with pytest.raises(BadRequest, match="route"):
        rec(rig, "x", route="no spaces allowed")
    with pytest.raises(BadRequest, match="kept header"):
        rig.client.record(
            "github", "x", window_s=None, queue_max=5, headers={"X-Big": "v" * 5000}, body=b"", client="c"
        )
    with pytest.raises(BadRequest, match="body"):
        rec(rig, "x", body=b"x" * (m.MAX_BODY + 1))
    assert rig.client.counts().routes == {} and rig.client.get("github", "x") is None


def test_retention_prunes_done_intakes_after_the_longer_of_30_days_and_the_window(rig: Rig) -> None:
    rec(rig, "old")
    rec(rig, "open-old")
    rig.client.done("github", "old", "posted")
    rig.clock.t += 31 * DAY
    rec(rig, "young")
    rig.client.done("github", "young", "posted")
    assert rig.engine.prune()["intakes"] == 1
    assert (
        rig.client.get("github", "old") is None
        and rig.client.by_turn(delivery_turn_id("github", "old")) is None
    )
    assert rig.client.get("github", "open-old") is not None  # not done: never pruned
    assert [r.delivery_id for r in rig.client.recent()] == ["young", "open-old"]
    assert rig.client.counts().routes == {"github": {"recorded": 1, "done": 1}}
    assert not rec(rig, "old").replayed  # its dedupe entry went with it
    # a route whose window is longer than 30 days keeps its done intakes for the window
    key = body_key(b"slow")
    rec(rig, key, route="slow", window_s=40 * DAY)
    rig.client.done("slow", key, "none")
    rig.clock.t += 35 * DAY
    assert rig.engine.prune()["intakes"] == 1  # "young" (35 days), not the 40-day window's intake
    assert rec(rig, key, route="slow", window_s=40 * DAY).replayed


def test_a_full_map_is_store_full_and_nothing_is_half_written(home: GeodeHome) -> None:
    rig = make_rig(home, StoreConfig(map_size_mb=1, map_max_mb=1))
    try:
        body = b"x" * (200 * 1024)
        recorded = []
        with pytest.raises(StoreFull, match="store_full: record store map is full"):
            for i in range(40):
                rec(rig, f"big-{i}", body=body, queue_max=100)
                recorded.append(f"big-{i}")
        lost = f"big-{len(recorded)}"
        assert recorded and rig.client.get("github", lost) is None
        assert rig.client.by_turn(delivery_turn_id("github", lost)) is None
        assert rig.client.counts().open == {"github": len(recorded)}  # the counter did not move either
        assert len(rig.client.open_rows()) == len(recorded)  # paged: each page one frame
        assert rig.client.get("github", recorded[-1]) is not None
        assert rec(rig, recorded[0]).replayed  # what was acknowledged stays readable and deduped
    finally:
        rig.engine.close()
