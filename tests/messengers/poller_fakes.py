"""In-process fakes of the poller's ports (translator, store, lanes, executor) for one-process tests of
``geode.messengers.poller``: every piece runs here, the platform is a list of scripted updates."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from geode.messengers.bindings import Bindings
from geode.messengers.config import MessengerBinding
from geode.messengers.errors import PlatformError
from geode.messengers.model import Batch, CallbackPress, InboundMessage
from geode.messengers.poller import Poller, PollerSettings
from geode.messengers.runner import PollerRunner
from geode.messengers.schedule import Backoff
from geode.protocol import lanes as lanes_msg
from geode.protocol import messengers as messengers_msg
from geode.protocol.errors import Unavailable
from geode.records.models import TurnRecord, TurnState


def msg(chat: str, mid: int, text: str, sender: str = "7", **kw: Any) -> InboundMessage:
    return InboundMessage(
        platform="telegram", chat_id=chat, message_id=str(mid), sender_id=sender, text=text, **kw
    )


class FakeTranslator:
    """Updates are pushed with ``push``; ``fail`` scripts the next calls of a method to raise."""

    platform = "telegram"

    def __init__(self) -> None:
        self.bot_id = 99
        self.updates: list[tuple[int, InboundMessage | CallbackPress | None]] = []
        self.next_id = 1
        self.posts: list[tuple[str, str, str]] = []
        self.keyboards: list[tuple[str, str, list[tuple[str, str]]]] = []
        self.answers: list[tuple[str, str]] = []
        self.edits: list[tuple[str, str, str]] = []
        self.typings: list[str] = []
        self.poll_times: list[float] = []
        self.offsets: list[int | None] = []
        self.confirmed: list[list[str]] = []
        self.failures: dict[str, list[PlatformError]] = {}
        self.lock = threading.Lock()

    def push(self, item: InboundMessage | CallbackPress | None, update_id: int | None = None) -> int:
        with self.lock:
            uid = update_id if update_id is not None else self.next_id
            self.next_id = max(self.next_id, uid + 1)
            self.updates.append((uid, item))
            return uid

    def fail(self, method: str, *errors: PlatformError) -> None:
        with self.lock:
            self.failures.setdefault(method, []).extend(errors)

    def _maybe_fail(self, method: str) -> None:
        with self.lock:
            queued = self.failures.get(method)
            if queued:
                raise queued.pop(0)

    async def start(self) -> str:
        self._maybe_fail("start")
        return "geode_bot"

    async def poll(self, cursor: str | None) -> Batch:
        offset = int(cursor) if cursor is not None else None
        self.poll_times.append(time.monotonic())
        self.offsets.append(offset)
        self._maybe_fail("poll")
        with self.lock:
            if offset is not None:  # the offset confirms everything before it
                self.updates = [u for u in self.updates if u[0] >= offset]
            batch = list(self.updates)
        if not batch:
            await asyncio.sleep(0.01)
            return Batch()
        return Batch([(str(uid), item) for uid, item in batch], str(max(uid for uid, _ in batch) + 1))

    async def confirm(self, batch: Batch) -> None:
        self.confirmed.append([did for did, _ in batch.items])

    async def send_text(self, channel_key: str, text: str, *, reply_to: str = "") -> list[str]:
        self._maybe_fail("send_text")
        with self.lock:
            self.posts.append((channel_key, text, reply_to))
            return [str(1000 + len(self.posts))]

    async def typing(self, channel_key: str) -> None:
        self.typings.append(channel_key)

    async def ask_approval(self, channel_key: str, text: str, buttons: list[tuple[str, str]]) -> str:
        self.keyboards.append((channel_key, text, buttons))
        return str(5000 + len(self.keyboards))

    async def answer_press(self, callback_id: str, text: str = "") -> None:
        self.answers.append((callback_id, text))

    async def edit_text(self, channel_key: str, message_id: str, text: str) -> None:
        self.edits.append((channel_key, message_id, text))

    async def close(self) -> None:
        return None


class FakeStore:
    def __init__(self) -> None:
        self.cursors: dict[tuple[str, str, str], str] = {}
        self.seen: set[str] = set()
        self.turns: dict[str, TurnRecord] = {}
        self.set_calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def get_cursor(self, platform: str, account: str, channel: str) -> str | None:
        return self.cursors.get((platform, account, channel))

    def set_cursor(self, platform: str, account: str, channel: str, position: str) -> None:
        with self.lock:
            self.cursors[(platform, account, channel)] = position
            self.set_calls.append((channel, position))

    def get_turn(self, turn_id: str) -> TurnRecord | None:
        return self.turns.get(turn_id)

    def dedupe(self, key: str, *, ttl_s: float) -> bool:
        with self.lock:
            first = key not in self.seen
            self.seen.add(key)
            return first


class FakeLanes:
    """Stores a queued record per submit (idempotent by turn id); ``finish`` marks it done."""

    def __init__(self, store: FakeStore) -> None:
        self.store = store
        self.submits: list[lanes_msg.Submit] = []
        self.replies: list[lanes_msg.ApprovalReply] = []
        self.stale: set[str] = set()
        self.down = False

    def submit(self, sub: lanes_msg.Submit) -> lanes_msg.Submitted:
        if self.down:
            raise Unavailable("lanes is restarting")
        self.submits.append(sub)
        if sub.turn_id not in self.store.turns:
            self.store.turns[sub.turn_id] = TurnRecord(
                turn_id=sub.turn_id,
                session_id=sub.session_id,
                mode=sub.mode,
                origin=sub.origin,
                input=sub.input,
            )
        return lanes_msg.Submitted(turn_id=sub.turn_id, session_id=sub.session_id, state="queued")

    def finish(self, turn_id: str, text: str) -> dict[str, Any]:
        rec = self.store.turns[turn_id]
        outcome = {"text": text, "termination_reason": "natural"}
        self.store.turns[turn_id] = rec.model_copy(update={"state": TurnState.DONE, "outcome": outcome})
        return outcome

    def approval_reply(self, reply: lanes_msg.ApprovalReply) -> bool:
        self.replies.append(reply)
        return reply.approval_id not in self.stale  # stale: lanes already denied it (timeout)


class FakeExecutor:
    """``messenger.deliver``: one receipt per operation id; posts through the runner like the real child."""

    def __init__(self) -> None:
        self.runner: PollerRunner | None = None
        self.receipts: dict[str, messengers_msg.Delivered] = {}
        self.calls: list[messengers_msg.DeliverReply] = []

    def deliver(self, req: messengers_msg.DeliverReply) -> messengers_msg.Delivered:
        self.calls.append(req)
        if req.operation_id in self.receipts:
            return messengers_msg.Delivered(state="replayed")
        assert self.runner is not None
        key = req.channel.partition(":")[2]
        ids = self.runner.submit(self.runner.poller.post(key, req.text, req.reply_to), 10.0)
        out = messengers_msg.Delivered(state="posted", message_ids=ids)
        self.receipts[req.operation_id] = out
        return out


BINDINGS = [
    MessengerBinding(platform="telegram", channel_id="100"),
    MessengerBinding(platform="telegram", channel_id="200", allowed_senders=["7"], approvers=["8"]),
]


SESSION_KEY = bytes(range(32))  # the rig's session-id key (a home keeps its own in keys/session-id.key)


class Rig:
    """A poller over the fakes, run by a real :class:`PollerRunner` (own thread and loop)."""

    def __init__(
        self,
        store: FakeStore | None = None,
        executor: FakeExecutor | None = None,
        settings: Callable[[MessengerBinding, str], dict[str, Any]] | None = None,
        **poller_kw: Any,
    ) -> None:
        self.translator = FakeTranslator()
        self.store = store or FakeStore()
        self.lanes = FakeLanes(self.store)
        self.executor = executor or FakeExecutor()
        opts = {"recover_every_s": 0.1, "typing_every_s": 0.1, "backoff_base_s": 0.01, "backoff_max_s": 0.05}
        opts["session_key"] = SESSION_KEY
        self.poller = Poller(
            PollerSettings("telegram", **(opts | poller_kw)),
            self.translator,
            Bindings(BINDINGS),
            self.store,
            self.lanes,
            self.executor,
            settings or (lambda b, sid: {"session_id": sid, "time_budget_s": b.time_budget_s}),
        )
        self.runner = PollerRunner(self.poller, restart=Backoff(0.01, 0.05))
        self.executor.runner = self.runner

    def __enter__(self) -> Rig:
        self.runner.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.runner.stop()

    def event(self, turn_id: str, kind: str, data: dict[str, Any] | None = None) -> None:
        rec = self.store.turns[turn_id]
        ev = lanes_msg.StreamEvent(
            session_id=rec.session_id, turn_id=turn_id, seq=1, kind=kind, data=data or {}
        )
        self.poller.on_event(ev)

    def cursor(self) -> str | None:
        return self.store.get_cursor("telegram", "99", "updates")
