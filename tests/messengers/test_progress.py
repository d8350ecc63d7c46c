"""Live progress (geode/messengers/progress.py) on a fake clock, against the outbox with in-memory fakes: no
status for a turn under the threshold; one status posted past it, edited at most every interval, deleted when
the answer settles; a 429 on an edit skips edits in that chat without holding the answer's rate gate; a
restarted child edits the same message, and one whose post may have gone out (the durable marker "?") posts
and edits nothing more; the platform actor's ledger refusing the operation posts nothing."""

from __future__ import annotations

import asyncio
from typing import Any

from geode.messengers.bindings import Bindings
from geode.messengers.errors import RateLimited
from geode.messengers.journal import PollerState
from geode.messengers.outbox import Outbox, TurnInfo
from geode.messengers.progress import Progress, status_operation_id, status_text
from geode.messengers.schedule import PollerStatus, RateGate
from geode.protocol import lanes as lanes_msg
from tests.messengers.poller_fakes import FakeExecutor, FakeLanes, FakeStore, FakeTranslator

TURN, CHAT = "t-1", "-100"


class StatusTranslator(FakeTranslator):
    """The fake translator with the live-progress calls, recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[tuple[str, str]] = []
        self.deleted: list[str] = []

    async def send_status(self, channel_key: str, text: str, *, reply_to: str = "") -> str:
        self._maybe_fail("send_status")
        self.statuses.append((channel_key, text))
        return f"s{len(self.statuses)}"

    async def edit_text(self, channel_key: str, message_id: str, text: str) -> None:
        self._maybe_fail("edit_text")
        await super().edit_text(channel_key, message_id, text)

    async def delete(self, channel_key: str, message_id: str) -> None:
        self.deleted.append(message_id)


class Ledger:
    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}

    def reserve(self, key: str) -> Any:
        seen = self.keys.get(key)
        self.keys.setdefault(key, "inflight")
        return seen

    def record(self, key: str, outcome: Any) -> None:
        self.keys[key] = outcome


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _progress(
    store: FakeStore, tr: StatusTranslator, clock: Clock, ledger: Ledger | None = None
) -> tuple[Progress, Outbox]:
    out = Outbox(
        "telegram",
        tr,
        Bindings([]),
        store,
        FakeLanes(store),
        FakeExecutor(),
        PollerStatus("telegram"),
        RateGate(),
    )
    out.state = PollerState(store, "telegram", "99")
    out.state.load()
    out.state.add(TURN)
    out.turns[TURN] = TurnInfo("s-1", CHAT, "7")
    prog = Progress(out, after_s=5.0, every_s=10.0, clock=clock)
    prog.ledger = ledger or Ledger()
    return prog, out


def _event(kind: str, **data: Any) -> lanes_msg.StreamEvent:
    return lanes_msg.StreamEvent(session_id="s-1", turn_id=TURN, seq=1, kind=kind, data=data)


async def _tick(prog: Progress, out: Outbox) -> None:
    await prog.tick()
    await asyncio.gather(*list(out._tasks))


def test_a_turn_under_the_threshold_gets_no_status() -> None:
    async def run() -> None:
        tr, clock = StatusTranslator(), Clock()
        prog, out = _progress(FakeStore(), tr, clock)
        await prog.on_event(_event(lanes_msg.TURN_STARTED))
        clock.now += 4.9
        await _tick(prog, out)
        await prog.on_event(_event(lanes_msg.TURN_DONE))
        await prog.finish(TURN)
        assert tr.statuses == [] and tr.edits == [] and tr.deleted == []

    asyncio.run(run())


def test_one_status_edited_at_most_every_interval_then_deleted() -> None:
    async def run() -> None:
        tr, clock = StatusTranslator(), Clock()
        prog, out = _progress(FakeStore(), tr, clock)
        await prog.on_event(_event(lanes_msg.TURN_STARTED))
        clock.now += 5.0
        await prog.on_event(_event("tool_start", name="web_fetch"))
        await _tick(prog, out)
        assert tr.statuses == [(CHAT, status_text(5, "web_fetch", False))]
        for step in (3.0, 3.0, 3.0):  # 9 s after the post: not yet
            clock.now += step
            await _tick(prog, out)
        assert tr.edits == []
        clock.now += 1.0
        await prog.on_event(_event("tool_end", name="web_fetch"))
        await _tick(prog, out)
        assert tr.edits == [(CHAT, "s1", status_text(15, "", False))]
        await _tick(prog, out)
        assert len(tr.statuses) == 1 and len(tr.edits) == 1
        await prog.on_event(_event(lanes_msg.TURN_DONE))
        clock.now += 30
        await _tick(prog, out)
        assert len(tr.edits) == 1  # ended: no more edits
        await prog.finish(TURN)
        assert tr.deleted == ["s1"] and prog.live == {}

    asyncio.run(run())


def test_a_429_on_an_edit_skips_it_and_never_holds_the_answers_gate() -> None:
    async def run() -> None:
        tr, clock = StatusTranslator(), Clock()
        prog, out = _progress(FakeStore(), tr, clock)
        await prog.on_event(_event(lanes_msg.TURN_STARTED))
        clock.now += 5.0
        await _tick(prog, out)
        tr.fail("edit_text", RateLimited("429", retry_after_s=30))
        clock.now += 10.0
        await _tick(prog, out)
        assert tr.edits == [] and out.gate.remaining() == 0  # an answer would go out at once
        clock.now += 20.0
        await _tick(prog, out)
        assert tr.edits == []  # quiet until the retry_after
        clock.now += 10.0
        await _tick(prog, out)
        assert len(tr.edits) == 1

    asyncio.run(run())


def test_a_restarted_child_edits_the_same_status_and_posts_none() -> None:
    async def run() -> None:
        store, clock = FakeStore(), Clock()
        tr = StatusTranslator()
        prog, out = _progress(store, tr, clock)
        await prog.on_event(_event(lanes_msg.TURN_STARTED))
        clock.now += 6.0
        await _tick(prog, out)
        assert tr.statuses and out.state is not None
        # a new incarnation: the journal and the markers from the store, no turn_started seen again
        tr2 = StatusTranslator()
        prog2, out2 = _progress(store, tr2, clock)
        await prog2.load()
        clock.now += 10.0
        await _tick(prog2, out2)
        assert tr2.statuses == [] and [e[1] for e in tr2.edits] == ["s1"]
        assert tr2.edits[0][2] == status_text(16, "", False)  # the elapsed time since the first start
        await prog2.finish(TURN)
        assert tr2.deleted == ["s1"]

    asyncio.run(run())


def test_a_status_post_that_may_have_gone_out_is_never_posted_again_nor_edited() -> None:
    async def run() -> None:
        store, clock = FakeStore(), Clock()
        tr = StatusTranslator()
        prog, out = _progress(store, tr, clock)
        await prog.on_event(_event(lanes_msg.TURN_STARTED))
        clock.now += 6.0
        reached = asyncio.Event()

        async def killed_mid_post(channel_key: str, text: str, *, reply_to: str = "") -> str:
            reached.set()  # the request is out; the process dies before it hears back
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        tr.send_status = killed_mid_post  # type: ignore[method-assign]
        await prog.tick()
        await asyncio.wait_for(reached.wait(), 5)
        await out.cancel_all()  # the killed incarnation: nothing after the post runs
        tr2 = StatusTranslator()
        prog2, out2 = _progress(store, tr2, clock)
        await prog2.load()
        await prog2.on_event(_event(lanes_msg.TURN_STARTED))  # lanes re-runs it
        clock.now += 30.0
        await _tick(prog2, out2)
        assert tr2.statuses == [] and tr2.edits == []
        await prog2.finish(TURN)
        assert tr2.deleted == []

    asyncio.run(run())


def test_the_ledger_refusing_the_operation_posts_nothing() -> None:
    async def run() -> None:
        tr, clock, ledger = StatusTranslator(), Clock(), Ledger()
        ledger.keys[status_operation_id(TURN)] = "unknown"
        prog, out = _progress(FakeStore(), tr, clock, ledger)
        await prog.on_event(_event(lanes_msg.TURN_STARTED))
        clock.now += 6.0
        await _tick(prog, out)
        clock.now += 20.0
        await _tick(prog, out)
        assert tr.statuses == [] and tr.edits == []

    asyncio.run(run())
