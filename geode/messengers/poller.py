"""The platform-neutral messenger poller: polls the platform through its translator (a :class:`Batch`),
submits each bound chat's messages as DAEMON turns in order (durable dedupe by message id), stores the
batch's cursor only after its turns are recorded, then lets the translator confirm the batch (Slack acks
its envelopes), and answers the chat's commands (chat_commands.py). Failures back off with jitter; a 429's
``retry_after`` holds the next platform call; a 409 conflict is reported once and retried.
The outbound half is :mod:`outbox`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from geode import faults
from geode.home import GeodeHome
from geode.messengers import chat_commands, inbox, notices
from geode.messengers.bindings import Bindings, Command, Ignore
from geode.messengers.config import MessengerBinding, MessengersSection
from geode.messengers.errors import Conflict, PlatformError, RateLimited
from geode.messengers.journal import PollerState
from geode.messengers.model import Batch, CallbackPress, InboundMessage, Item, Unhandled
from geode.messengers.outbox import Outbox, TurnInfo
from geode.messengers.ports import DeliverPort, LanesPort, StorePort, Translator
from geode.messengers.progress import Progress
from geode.messengers.schedule import Backoff, PollerStatus, RateGate
from geode.messengers.sessions import dedupe_key, session_id_for, turn_id_for
from geode.protocol import lanes as lanes_msg
from geode.protocol.errors import ErrorCode, GeodeError, Unavailable
from geode.telemetry import spans

log = logging.getLogger(__name__)
ORIGIN = "messengers"
READY_WAIT_S = 20.0
MAX_EARLY_EVENTS = 1000
# (binding, session id) → the SessionSpec dict a DAEMON turn of that chat runs with
SessionSettings = Callable[[MessengerBinding, str], dict[str, Any]]


@dataclass(frozen=True)
class PollerSettings:
    platform: str
    recover_every_s: float = 5.0
    typing_every_s: float = 4.0
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    dedupe_ttl_s: float = 7 * 86400.0
    deliver_attempts: int = 5
    retry_cap_s: float = 300.0  # [messengers] retry_cap_s
    notice_every_s: float = 3600.0  # an unsupported kind is answered once per chat per kind per this
    session_key: bytes = field(default=b"", repr=False)  # the home's session-id key (home_secrets)
    progress_after_s: float = 0.0  # [messengers] progress_after_s (0: no status messages)
    progress_every_s: float = 10.0  # [messengers] progress_every_s


def cursor_view(cursor: str | None) -> int | str | None:
    """The cursor as ``geode status`` shows it: Telegram's offset as a number."""
    return int(cursor) if cursor is not None and cursor.isdigit() else cursor


class Poller:
    """One platform's poller. ``run()`` runs until cancelled or a non-retryable failure (the caller restarts
    it); the object keeps its counters and its stream queue across runs."""

    def __init__(
        self,
        settings: PollerSettings,
        translator: Translator,
        bindings: Bindings,
        store: StorePort,
        lanes: LanesPort,
        executor: DeliverPort,
        session_settings: SessionSettings,
        *,
        backoff: Backoff | None = None,
    ) -> None:
        self.settings = settings
        self.platform = settings.platform
        self.translator = translator
        self.bindings = bindings
        self.store, self.lanes = store, lanes
        self.session_settings = session_settings
        self.status = PollerStatus(settings.platform)
        self.gate = RateGate()
        self.backoff = backoff or Backoff(settings.backoff_base_s, settings.backoff_max_s)
        self.out = Outbox(
            self.platform,
            translator,
            bindings,
            store,
            lanes,
            executor,
            self.status,
            self.gate,
            deliver_attempts=settings.deliver_attempts,
            retry_cap_s=settings.retry_cap_s,
        )
        self.progress = Progress(self.out, settings.progress_after_s, settings.progress_every_s)
        self.username = ""
        self.inbox: inbox.Inbox | None = None  # where inbound files are saved (the child sets it)
        self.memory: chat_commands.ChatMemory | None = None  # the chats' /memory (the child sets it)
        self.cursor: str | None = None
        self.ready = asyncio.Event()  # started: posts may go out (a post waits a little for a restart)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._events: asyncio.Queue[lanes_msg.StreamEvent] | None = None
        self._batch: Batch | None = None  # polled, not yet recorded whole: retried without polling again
        self._handled: set[str] = set()  # delivery ids of ``_batch`` handled already
        self._early: list[lanes_msg.StreamEvent] = []  # events that came before the loop ran (kept in order)
        self._early_lock = threading.Lock()
        self._conflict_reported = False

    def keep_files(self, home: GeodeHome, section: MessengersSection, transcriber: Any = None) -> None:
        """Save inbound files under each chat's workspace, within ``section``'s limits (inbox.py); voice notes
        are transcribed by ``transcriber`` (transcription.py; None: not enabled)."""
        self.inbox = inbox.Inbox.of(home, section, transcriber)

    # --- from other threads ---------------------------------------------------------------------------
    def on_event(self, ev: lanes_msg.StreamEvent) -> None:
        """A turn stream event (any thread). Before the first run it is kept (lanes re-asks a pending approval
        as soon as we connect, possibly before the loop runs); once the loop is gone it is dropped (the
        recovery of pending replies covers a lost ``turn_done``)."""
        with self._early_lock:
            loop, events = self.loop, self._events
            if loop is None or events is None:
                if len(self._early) < MAX_EARLY_EVENTS:
                    self._early.append(ev)
                return
        if loop.is_closed():
            return
        if ev.kind == lanes_msg.TURN_DONE:  # lanes sent it under the turn's trace (tracing on)
            self.out.traces.note(ev.turn_id, spans.current())
        try:
            loop.call_soon_threadsafe(events.put_nowait, ev)
        except RuntimeError:  # the loop closed meanwhile
            pass

    # --- the run ------------------------------------------------------------------------------------
    async def run(self) -> None:
        with self._early_lock:
            self.loop = asyncio.get_running_loop()
            if self._events is None:
                self._events = asyncio.Queue()
            for ev in self._early:
                self._events.put_nowait(ev)
            self._early.clear()
        self.status.state = "starting"
        bg: list[asyncio.Task[None]] = []
        try:
            await self._retrying(self._start)
            self.ready.set()
            bg = [
                asyncio.create_task(self._drain_events()),
                asyncio.create_task(self._every(self.settings.recover_every_s, self.out.recover)),
                asyncio.create_task(self._every(self.settings.typing_every_s, self.out.typing_tick)),
                asyncio.create_task(self._every(self.progress.period_s, self.progress.tick)),
            ]
            while True:
                await self._retrying(self._poll_once)
        finally:
            self.ready.clear()
            for t in bg:
                t.cancel()
            await asyncio.gather(*bg, return_exceptions=True)
            await self.out.cancel_all()
            try:
                await self.translator.close()
            except Exception as exc:  # closing is best effort
                log.debug("%s translator close: %s", self.platform, exc)

    async def _start(self) -> None:
        self.username = await self.out.call(self.translator.start)
        state = PollerState(self.store, self.platform, str(self.translator.bot_id))
        pending = await asyncio.to_thread(state.load)
        self.cursor = await asyncio.to_thread(state.cursor)
        self.out.state = state
        await self.progress.load()  # the status messages of turns still owed a reply: edited on
        attach = getattr(self.translator, "attach_positions", None)
        if attach is not None:  # Discord reads history after them after each new gateway session
            attach(state, [b.channel_id for b in self.bindings.for_platform(self.platform)])
        self.status.cursor = cursor_view(self.cursor)
        self.status.pending_replies = len(pending)
        self.status.started()  # shown at once: a long poll may not answer for poll_timeout_s
        log.info(
            "%s poller started as @%s at cursor %s (%d replies pending)",
            self.platform,
            self.username,
            self.cursor,
            len(pending),
        )

    async def _retrying(self, step: Callable[[], Awaitable[None]]) -> None:
        """Run ``step`` until it succeeds; retryable failures wait (jittered backoff, or the 429's gate)."""
        while True:
            try:
                await step()
            except RateLimited as exc:
                self.status.error("backoff", f"rate limited; next call in {exc.retry_after_s:g} s")
                continue  # out.call held the gate: the next call waits for it
            except Conflict as exc:
                self.status.conflicts += 1
                self.status.error("conflict", str(exc))
                if not self._conflict_reported:
                    self._conflict_reported = True
                    log.warning(
                        "%s: conflict (another poller or a webhook): %s; retrying", self.platform, exc
                    )
            except PlatformError as exc:
                if not exc.retryable:
                    raise
                self.status.error("backoff", str(exc))
                log.info("%s poll failed (retrying): %s", self.platform, exc)
            except GeodeError as exc:  # the store or lanes is (re)starting: the batch is retried whole
                self.status.error("backoff", f"{exc}")
                log.info("%s: %s; retrying the batch", self.platform, exc)
            else:
                self.backoff.reset()
                self._conflict_reported = False
                return
            await asyncio.sleep(self.backoff.next())

    async def _every(self, period_s: float, fn: Callable[[], Awaitable[None]]) -> None:
        while True:
            try:
                await fn()
            except Exception:
                log.exception("%s periodic task failed", self.platform)
            await asyncio.sleep(period_s)

    async def _drain_events(self) -> None:
        assert self._events is not None
        while True:
            ev = await self._events.get()
            try:
                await self.progress.on_event(ev)
                await self.out.on_event(ev)
            except Exception:
                log.exception("%s stream event %s failed", self.platform, ev.kind)

    # --- inbound ------------------------------------------------------------------------------------
    async def _poll_once(self) -> None:
        """Poll (unless a batch failed half-way: that one is retried, never polled again, since a push
        platform would not deliver it twice), submit its turns, store its cursor, then confirm it."""
        batch = self._batch
        if batch is None:
            cursor = self.cursor
            batch = await self.out.call(lambda: self.translator.poll(cursor))
            self.status.state = "polling"
            self.status.last_poll_ok_at = time.time()
            if not batch.items:
                return
            self._batch, self._handled = batch, set()
        for did, item in batch.items:
            if did not in self._handled:
                await self._handle_or_skip(did, item)
                self._handled.add(did)
        faults.fault("messengers.after_turn_record")  # the batch's turns are recorded, the cursor not moved
        assert self.out.state is not None
        nxt = batch.next_cursor
        if nxt is not None and nxt != self.cursor:
            await asyncio.to_thread(self.out.state.set_cursor, nxt)
            self.cursor = nxt
            self.status.cursor = cursor_view(nxt)
        for channel, position in batch.positions.items():
            await asyncio.to_thread(self.out.state.set_position, channel, position)
        self._batch, self._handled = None, set()
        self.status.state = "polling"
        try:
            await self.out.call(lambda: self.translator.confirm(batch))
        except PlatformError as exc:  # not confirmed: the platform delivers it again; dedupe drops it
            self.status.last_error = f"confirm: {exc}"[:500]
            log.info("%s batch not confirmed (it comes again): %s", self.platform, exc)

    async def _handle_or_skip(self, uid: str, item: Item) -> None:
        """Handle one update; one that can never be handled (refused, or a bug) is logged, counted as
        ``error`` and skipped, so it cannot hold the chat's cursor forever. Transient failures propagate:
        the batch is retried."""
        try:
            await self._handle(item)
        except GeodeError as exc:
            if exc.code != ErrorCode.BAD_REQUEST:
                raise
            self.status.ignored["error"] += 1
            log.warning("%s update %s refused, skipped: %s", self.platform, uid, exc)
        except PlatformError:
            raise
        except Exception:
            self.status.ignored["error"] += 1
            log.exception("%s update %s failed, skipped", self.platform, uid)

    async def _handle(self, item: Item) -> None:
        if item is None:
            self.status.ignored["kind"] += 1
        elif isinstance(item, Unhandled):
            await self._unhandled(item)
        elif isinstance(item, CallbackPress):
            await self.out.press(item)
        else:
            verdict = self.bindings.classify(item, bot_username=self.username)
            if isinstance(verdict, Ignore):
                self.status.ignored[verdict.reason] += 1
            elif isinstance(verdict, Command) and verdict.name == "compact":  # a turn that only compacts
                await self._turn(item, "/compact", verdict.binding, compact=True)
            elif isinstance(verdict, Command):
                await chat_commands.answer(self, item, verdict.name, verdict.binding)
            else:
                await self._turn(item, verdict.text, verdict.binding)

    async def _turn(
        self, msg: InboundMessage, text: str, binding: MessengerBinding, compact: bool = False
    ) -> None:
        state = self.out.state
        assert state is not None
        key = msg.channel_key
        turn_id = turn_id_for(self.platform, key, msg.turn_message_id)  # an edit re-run: its own turn
        dkey = dedupe_key(self.platform, key, msg.turn_message_id)
        first = await asyncio.to_thread(self.store.dedupe, dkey, ttl_s=self.settings.dedupe_ttl_s)
        if not first and await asyncio.to_thread(self.store.get_turn, turn_id) is not None:
            await asyncio.to_thread(state.add, turn_id)  # journaled again in case the first try died first
            self.status.ignored["duplicate"] += 1
            return
        taken = await inbox.take_files(self, msg, binding)  # saved under the chat's inbox; None: refused
        if taken is None:
            return
        gen = await asyncio.to_thread(state.generation, key)
        sid = session_id_for(self.platform, key, gen, self.settings.session_key)
        sub = lanes_msg.Submit(
            turn_id=turn_id,
            session_id=sid,
            mode="DAEMON",
            origin=ORIGIN,
            input={
                "text": taken.prompt(text),
                **taken.refs(),  # images and files by sha256 and path: a restart neither loses nor refetches
                "messenger": {
                    "platform": self.platform,
                    "channel_key": key,
                    "message_id": msg.message_id,
                    "sender_id": msg.sender_id,
                },
            },
            settings={
                **await asyncio.to_thread(self.session_settings, binding, sid),
                **({"compact_now": True} if compact else {}),  # /compact (chat_commands.py)
            },
        )
        self.out.turns[turn_id] = TurnInfo(sid, key, msg.message_id)
        await asyncio.to_thread(state.add, turn_id)  # journaled before lanes has it: no reply is ever lost
        attrs = {"geode.platform": self.platform, "geode.turn_id": turn_id}
        with spans.span("messengers.message", attrs, root=True):  # the turn's trace starts here
            await asyncio.to_thread(self.lanes.submit, sub)  # (to_thread carries the span's context)
        await asyncio.to_thread(state.set_last_turn, key, turn_id)
        notices.ack(self, msg, binding)
        self.status.messages_in += 1
        self.status.pending_replies = len(state.pending)

    async def _unhandled(self, item: Unhandled) -> None:
        await notices.answer_unhandled(self, item)  # counted; one short receipted reply, or none

    # --- posts (any thread → the loop) ----------------------------------------------------------------
    async def post(self, channel_key: str, text: str, reply_to: str = "") -> list[str]:
        """Post in the chat once the poller runs (waits up to ``READY_WAIT_S`` for a (re)start: a refusal
        settles the receipt as not sent, so waiting a little beats refusing)."""
        try:
            await asyncio.wait_for(self.ready.wait(), READY_WAIT_S)
        except TimeoutError:
            why = f"the {self.platform} poller is not running (starting or backing off)"
            raise Unavailable(why) from None
        return await self.out.post(channel_key, text, reply_to)
