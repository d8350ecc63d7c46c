"""The poller's outbound side: a turn's stream from lanes (typing while it runs, an approval keyboard when
a tool asks, the reply on ``turn_done``), delivery of replies through the executor's receipts, recovery of
replies lost while the child was down, and the posts the executor asks for (``messenger.send``).

Runs on the poller's event loop; every blocking (bus) call goes through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from geode.messengers.approvals import DONE_LABEL, ApprovalBoard, TooLong, ask_parts, parse_data
from geode.messengers.bindings import Bindings
from geode.messengers.errors import NotPosted, PlatformError, RateLimited, Rejected
from geode.messengers.journal import PollerState
from geode.messengers.model import CallbackPress
from geode.messengers.ports import DeliverPort, LanesPort, StorePort, Translator
from geode.messengers.replies import reply_text, split_reply, text_limit
from geode.messengers.reply_trace import ReplyTraces
from geode.messengers.schedule import PollerStatus, RateGate
from geode.messengers.sessions import reply_operation_id
from geode.metrics import record as metrics
from geode.protocol import lanes as lanes_msg
from geode.protocol import messengers as messengers_msg
from geode.protocol.errors import BadRequest, ErrorCode, GeodeError, Unavailable
from geode.records.models import TurnState

log = logging.getLogger(__name__)
T = TypeVar("T")
SEND_RATE_RETRIES = 3
MAX_SEND_WAIT_S = 30.0  # a 429 asking for longer: this attempt is not posted, a later one is (retry_hint)
NOT_POSTED_RETRY_S = 15.0  # a 5xx or no connection: the next attempt after this (at most retry_cap_s)
MAX_DELIVERIES = 8  # replies delivered at once (each may wait for the executor's post)
MISSING_ROUNDS = 24  # recovery rounds a journaled turn may lack a record before it is dropped


@dataclass(frozen=True)
class TurnInfo:
    session_id: str
    channel_key: str
    message_id: str


class Outbox:
    """Outbound half of one platform's poller (see the module docstring)."""

    def __init__(
        self,
        platform: str,
        translator: Translator,
        bindings: Bindings,
        store: StorePort,
        lanes: LanesPort,
        executor: DeliverPort,
        status: PollerStatus,
        gate: RateGate,
        *,
        deliver_attempts: int = 5,
        retry_cap_s: float = 300.0,
    ) -> None:
        self.retry_cap_s = retry_cap_s  # the longest wait for a 429 / the next attempt of a deferred reply
        self.platform = platform
        self.translator = translator
        self.bindings = bindings
        self.store, self.lanes, self.executor = store, lanes, executor
        self.status = status
        self.gate = gate
        self.deliver_attempts = deliver_attempts
        self.state: PollerState | None = None
        self.turns: dict[str, TurnInfo] = {}  # pending turns' chats (filled on submit, or from the record)
        self.running: dict[str, str] = {}  # turn id → channel key, between turn_started and turn_done
        self.approvals = ApprovalBoard()
        self.traces = ReplyTraces()
        self._delivering: set[str] = set()
        self._missing: dict[str, int] = {}
        self._due: dict[str, tuple[float, int]] = {}  # deferred replies: turn → (retry at, attempt)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._deliveries = asyncio.Semaphore(MAX_DELIVERIES)  # leave I/O threads for polling and submits
        self.progress: Any = None  # the turns' live progress (progress.Progress sets itself)

    # --- platform calls ---------------------------------------------------------------------------------
    async def call(self, make: Callable[[], Awaitable[T]]) -> T:
        """One platform call after the rate-limit gate; a 429 holds the gate for its ``retry_after``."""
        await self.gate.wait()
        try:
            return await make()
        except RateLimited as exc:
            self.gate.hold(min(exc.retry_after_s, self.retry_cap_s))
            self.status.rate_limited += 1
            metrics.rate_limit_wait(self.platform, min(exc.retry_after_s, self.retry_cap_s))
            raise

    async def best_effort(self, what: str, make: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await self.call(make)
        except PlatformError as exc:
            log.info("%s %s failed: %s", self.platform, what, exc)
            return None

    def spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s poller task failed", self.platform, exc_info=task.exception())

    async def cancel_all(self) -> None:
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- the turn stream ------------------------------------------------------------------------------
    async def on_event(self, ev: lanes_msg.StreamEvent) -> None:
        if ev.kind == lanes_msg.TURN_STARTED:
            info = await self.info(ev.turn_id)
            if info is not None:
                self.running[ev.turn_id] = info.channel_key
                await self.best_effort("typing", lambda: self.translator.typing(info.channel_key))
        elif ev.kind == lanes_msg.TURN_DONE:
            self.running.pop(ev.turn_id, None)
            for token in self.approvals.of_turn(ev.turn_id):
                self.spawn(self._expire(token))
            result = ev.data.get("result")
            self.spawn(self.deliver(ev.turn_id, result if isinstance(result, dict) else None))
        elif ev.kind == lanes_msg.APPROVAL_REQUEST:
            self.spawn(self.ask(lanes_msg.ApprovalAsk.model_validate(ev.data)))

    async def info(self, turn_id: str) -> TurnInfo | None:
        """The chat of a messenger turn (from memory, else its stored record); None if it is not one."""
        known = self.turns.get(turn_id)
        if known is not None:
            return known
        rec = await asyncio.to_thread(self.store.get_turn, turn_id)
        meta = rec.input.get("messenger") if rec is not None else None
        if rec is None or not isinstance(meta, dict) or meta.get("platform") != self.platform:
            return None
        info = TurnInfo(rec.session_id, str(meta.get("channel_key", "")), str(meta.get("message_id", "")))
        if turn_id in (self.state.pending if self.state else {}):
            self.turns[turn_id] = info
        return info

    async def typing_tick(self) -> None:
        for key in sorted(set(self.running.values())):
            await self.best_effort("typing", lambda k=key: self.translator.typing(k))  # type: ignore[misc]

    # --- replies --------------------------------------------------------------------------------------
    async def deliver(self, turn_id: str, outcome: dict[str, Any] | None = None) -> None:
        """Post a done turn's reply once (the executor's receipt makes a repeat a no-op), then settle it."""
        state = self.state
        if state is None or turn_id not in state.pending or turn_id in self._delivering:
            return
        self._delivering.add(turn_id)
        try:
            with self.traces.span(turn_id, self.platform):  # in the turn's trace (tracing on)
                await self._deliver(state, turn_id, outcome)
        finally:
            self._delivering.discard(turn_id)

    async def _deliver(self, state: PollerState, turn_id: str, outcome: dict[str, Any] | None) -> None:
        if outcome is None:
            rec = await asyncio.to_thread(self.store.get_turn, turn_id)
            if rec is None:
                self._missing[turn_id] = self._missing.get(turn_id, 0) + 1
                if self._missing[turn_id] >= MISSING_ROUNDS:  # never submitted (a refused submit)
                    log.warning("%s turn %s has no record; no reply is owed", self.platform, turn_id)
                    await self._settle(state, turn_id)
                return
            if rec.state != TurnState.DONE:
                return
            outcome = rec.outcome or {}
        self.running.pop(turn_id, None)  # its turn_done may have been lost: stop typing there
        info = await self.info(turn_id)
        if info is None:
            await self._settle(state, turn_id)
            return
        retry_at, attempt = self._due.get(turn_id, (0.0, 1))
        if retry_at > time.time():  # deferred: its own timer asks again when due
            return
        req = messengers_msg.DeliverReply(
            operation_id=reply_operation_id(turn_id),
            session_id=info.session_id,
            turn_id=turn_id,
            channel=f"{self.platform}:{info.channel_key}",
            text=reply_text(outcome)[: 64 * 1024],
            reply_to=info.message_id,
            attempt=attempt,
        )
        try:
            async with self._deliveries:
                out = await asyncio.to_thread(self.executor.deliver, req)
        except GeodeError as exc:  # the executor is down or slow: recovery asks again
            self.status.last_error = f"reply {turn_id}: {exc}"[:500]
            log.info("%s reply for %s not delivered yet: %s", self.platform, turn_id, exc)
            return
        metrics.messenger_post(self.platform, out.state)  # posted | deferred | not_sent | uncertain
        if out.state == "posted":
            self.status.replies_out += 1
        elif out.state == "deferred":  # known not posted: owed (journaled) until a later attempt posts it
            self._defer(turn_id, out)
            return
        elif (
            out.state == "not_sent"
        ):  # refused for good (chat gone, bot removed): `geode messengers` says why
            self.status.last_error = f"reply {turn_id} not sent: {out.reason}"[:500]
            log.warning("%s reply for %s not sent: %s", self.platform, turn_id, out.reason)
        elif out.state == "uncertain":
            log.warning("%s reply for %s is uncertain: %s", self.platform, turn_id, out.reason)
        await self._settle(state, turn_id)

    async def _settle(self, state: PollerState, turn_id: str) -> None:
        if self.progress is not None:  # the answer is settled: its status message goes
            await self.progress.finish(turn_id)
        await asyncio.to_thread(state.settle, turn_id)
        for d in (self.turns, self._missing, self._due):
            d.pop(turn_id, None)
        self.status.pending_replies = len(state.pending)

    def _defer(self, turn_id: str, out: messengers_msg.Delivered) -> None:
        retry_at = out.retry_at or time.time()
        self._due[turn_id] = (retry_at, out.attempt)
        self.status.last_error = f"reply {turn_id} not posted yet (attempt {out.attempt}): {out.reason}"[:500]
        self.spawn(self._deliver_at(turn_id, retry_at))

    async def _deliver_at(self, turn_id: str, retry_at: float) -> None:
        await asyncio.sleep(max(0.0, retry_at - time.time()))
        await self.deliver(turn_id)

    async def owe(self, turn_id: str) -> bool:
        """Journal ``turn_id``'s reply as owed again (an uncertain attempt observed not posted; observe.py);
        False before the journal is loaded."""
        if (state := self.state) is None:
            return False
        await asyncio.to_thread(state.add, turn_id)
        self.status.pending_replies = len(state.pending)
        return True

    async def recover(self) -> None:
        """Deliver every journaled turn that is done (its ``turn_done`` was lost, or arrived too early)."""
        state = self.state
        if state is None:
            return
        for turn_id in list(state.pending):
            await self.deliver(turn_id)
        self.status.pending_replies = len(state.pending)

    async def command_reply(self, req: messengers_msg.DeliverReply) -> None:
        try:
            out = await asyncio.to_thread(self.executor.deliver, req)
        except GeodeError as exc:
            log.info("%s command reply not delivered: %s", self.platform, exc)
            return
        if out.state == "posted":
            self.status.replies_out += 1

    # --- approvals ------------------------------------------------------------------------------------
    async def ask(self, ask: lanes_msg.ApprovalAsk) -> None:
        if self.approvals.has(ask.approval_id):
            return  # asked again (lanes re-asks when we reappear): the keyboard is already there
        info = await self.info(ask.turn_id)
        if info is None and await self._of_another_platform(ask.turn_id):
            return  # every platform's poller sees every approval: the turn's own platform asks it
        binding = self.bindings.find_channel(self.platform, info.channel_key) if info is not None else None
        if info is None or binding is None or not Bindings.has_approvers(binding):
            await self._reply(ask.approval_id, "n", reason="no_origin")  # nobody here may answer: denied
            return
        try:
            parts = ask_parts(ask, self.platform)
        except TooLong as exc:  # never a cut request shown as if whole: denied, and the model is told why
            log.info("%s approval %s not asked: %s", self.platform, ask.approval_id, exc)
            await self._reply(ask.approval_id, "n", note=f"not asked in the chat: {exc}")
            return
        token, buttons = self.approvals.open(ask, info.channel_key, parts[-1])
        entry = self.approvals.get(token)
        assert entry is not None
        self.status.approvals_open = len(self.approvals)
        try:
            for part in parts[:-1]:  # the request's first parts, then its last with the keyboard
                await self.call(partial(self.translator.send_text, info.channel_key, part))
            mid = await self.call(lambda: self.translator.ask_approval(info.channel_key, entry.text, buttons))
        except PlatformError as exc:
            log.warning("%s could not ask approval %s: %s", self.platform, ask.approval_id, exc)
            self.approvals.close(token)
            self.status.approvals_open = len(self.approvals)
            await self._reply(ask.approval_id, "n", reason="no_origin")
            return
        entry.message_id = str(mid)

    async def _of_another_platform(self, turn_id: str) -> bool:
        rec = await asyncio.to_thread(self.store.get_turn, turn_id)
        meta = rec.input.get("messenger") if rec is not None else None
        return isinstance(meta, dict) and meta.get("platform") not in (None, self.platform)

    async def press(self, p: CallbackPress) -> None:
        parsed = parse_data(p.data)
        entry = self.approvals.get(parsed[0]) if parsed else None
        if parsed is None or entry is None:
            await self.best_effort(
                "answer", lambda: self.translator.answer_press(p.callback_id, "Not pending.")
            )
            return
        binding = self.bindings.find(self.platform, p.chat_id, p.thread_id)
        if (
            binding is None
            or p.channel_key != entry.channel_key
            or not Bindings.may_approve(binding, p.sender_id)
        ):
            self.status.ignored["approver"] += 1
            await self.best_effort(
                "answer",
                lambda: self.translator.answer_press(p.callback_id, "You are not allowed to answer."),
            )
            return
        decision = parsed[1]
        self.approvals.close(parsed[0])
        self.status.approvals_open = len(self.approvals)
        taken = await self._reply(entry.approval_id, decision)
        label = DONE_LABEL[decision] if taken else "No longer pending"
        await self.best_effort("answer", lambda: self.translator.answer_press(p.callback_id, label))
        text = f"{entry.text}\n\n" + (f"{label} by {p.sender_id}." if taken else "No answer in time: denied.")
        await self.best_effort(
            "edit", lambda: self.translator.edit_text(entry.channel_key, entry.message_id, text)
        )

    async def _expire(self, token: str) -> None:
        entry = self.approvals.close(token)
        self.status.approvals_open = len(self.approvals)
        if entry is not None and entry.message_id:
            text = f"{entry.text}\n\nNo answer in time: denied."
            await self.best_effort(
                "edit", lambda: self.translator.edit_text(entry.channel_key, entry.message_id, text)
            )

    async def _reply(
        self, approval_id: str, decision: lanes_msg.Decision, reason: str = "user", note: str = ""
    ) -> bool:
        """Answer lanes; False when the approval is no longer pending there (timed out, turn ended)."""
        body = lanes_msg.ApprovalReply(approval_id=approval_id, decision=decision, reason=reason, note=note)  # type: ignore[arg-type]
        try:
            return await asyncio.to_thread(self.lanes.approval_reply, body)
        except GeodeError as exc:  # lanes denies at its timeout
            log.warning("%s approval %s answer not delivered: %s", self.platform, approval_id, exc)
            return False

    # --- posts (messenger.send) -----------------------------------------------------------------------
    async def post(self, channel_key: str, text: str, reply_to: str = "") -> list[str]:
        """Post ``text`` in parts. Nothing posted → ``BadRequest``/``Unavailable``; something may have been
        posted → a ``GeodeError`` (internal): the executor marks its receipt uncertain, never resends."""
        ids: list[str] = []
        for i, part in enumerate(split_reply(text, text_limit(self.platform))):
            ids += await self._post_part(channel_key, part, reply_to if i == 0 else "", posted=bool(ids))
        return ids

    async def _post_part(self, key: str, part: str, reply_to: str, *, posted: bool) -> list[str]:
        for attempt in range(SEND_RATE_RETRIES + 1):
            try:
                return await self.call(lambda: self.translator.send_text(key, part, reply_to=reply_to))
            except RateLimited as exc:  # refused: nothing of this part was posted; the gate waits
                if attempt == SEND_RATE_RETRIES or exc.retry_after_s > MAX_SEND_WAIT_S:
                    hint = messengers_msg.retry_hint(min(exc.retry_after_s, self.retry_cap_s))
                    raise self._failed(f"rate limited ({exc}) {hint}", posted=posted, sure=True) from exc
            except NotPosted as exc:  # a 5xx or no connection: nothing of this part was posted
                hint = messengers_msg.retry_hint(min(NOT_POSTED_RETRY_S, self.retry_cap_s))
                why = f"{self.platform} did not take the post ({exc}) {hint}"
                raise self._failed(why, posted=posted, sure=True) from exc
            except Rejected as exc:
                raise self._failed(f"rejected by {self.platform}: {exc}", posted=posted, sure=True) from exc
            except PlatformError as exc:  # network or server error: the post may have gone through
                raise self._failed(f"{self.platform} send failed: {exc}", posted=True, sure=False) from exc
        raise AssertionError("unreachable")

    @staticmethod
    def _failed(why: str, *, posted: bool, sure: bool) -> GeodeError:
        if not posted and sure:
            return BadRequest(why) if "rejected" in why else Unavailable(why)
        return GeodeError(f"partly or maybe posted: {why}", code=ErrorCode.INTERNAL)
