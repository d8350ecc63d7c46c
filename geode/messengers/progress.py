"""Live progress of a long chat turn: once a turn has run ``[messengers] progress_after_s``, one status
message (notifications off where the platform has the flag) replying in the turn's thread, edited in place at
most every ``progress_every_s`` per chat with the elapsed time, the tool running and "awaiting approval";
deleted once the turn's reply is settled (the final answer is its own, notifying, receipted message: outbox).

At most one status message per turn, also across restarts of the messengers child: the post goes through the
platform actor's at-most-once ledger (operation ``status-<turn id>``), and before it is sent the turn's
journal slot gets a durable marker (``status#<slot>``: the turn, when it started, ``"?"``), replaced by the
message id once posted. A restarted child reads the markers of the turns it still owes a reply: an id → it
edits that same message and deletes it after the answer; ``"?"`` (killed mid-post: maybe posted) → nothing
more for that turn. A status call never holds the platform's rate gate (a 429 on an edit skips edits in that
chat for its ``retry_after``), so it never delays an answer. Runs on the poller's loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from geode import faults
from geode.messengers.errors import NotPosted, PlatformError, RateLimited, Rejected
from geode.messengers.journal import RING
from geode.protocol import lanes as lanes_msg
from geode.protocol import messengers as messengers_msg
from geode.protocol.errors import GeodeError
from geode.protocol.turns import TurnEventKind

if TYPE_CHECKING:
    from geode.messengers.outbox import Outbox

log = logging.getLogger(__name__)
MAYBE = "?"  # a status post that may have gone out: never posted again, never edited
MAX_MARKER = 256  # the store's cursor value limit


@runtime_checkable
class StatusPoster(Protocol):
    """What a translator needs for live progress (Telegram, Slack and Discord have it)."""

    async def send_status(self, channel_key: str, text: str, *, reply_to: str = "") -> str: ...
    async def edit_text(self, channel_key: str, message_id: str, text: str) -> None: ...
    async def delete(self, channel_key: str, message_id: str) -> None: ...


class Ledger(Protocol):
    """The platform actor's at-most-once ledger of operation ids (blocking calls)."""

    def reserve(self, key: str) -> Any: ...  # None: post it now; else what an earlier post of it left
    def record(self, key: str, outcome: Any) -> None: ...  # sent, "unknown", or None (nothing posted)


def status_operation_id(turn_id: str) -> str:
    return f"status-{turn_id}"


def status_text(elapsed_s: float, tool: str, awaiting: bool) -> str:
    """What the status message says: the elapsed time, the tool running, whether an approval waits."""
    s = max(0, int(elapsed_s))
    lines = ["⏳ Working… " + (f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s")]
    if tool:
        lines.append(f"Running {tool}" + (" (awaiting approval)" if awaiting else ""))
    elif awaiting:
        lines.append("Awaiting approval")
    return "\n".join(lines)


@dataclass
class Live:
    """A running messenger turn as the progress sees it."""

    channel_key: str
    reply_to: str
    started: float  # wall clock, kept in the marker: the elapsed time survives a restart
    message_id: str = ""  # the status message; "" none yet, MAYBE maybe posted (no more for this turn)
    tool: str = ""
    shown: str = ""
    ended: bool = False
    busy: bool = False  # a post or edit is under way
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Progress:
    """One platform poller's live progress (see the module docstring)."""

    def __init__(
        self, out: Outbox, after_s: float, every_s: float, clock: Callable[[], float] = time.time
    ) -> None:
        self.out = out
        self.after_s, self.every_s = after_s, max(every_s, 0.05)
        self.clock = clock
        self.ledger: Ledger | None = None  # the child wires the platform actor's once it runs
        self.live: dict[str, Live] = {}
        self._edited: dict[str, float] = {}  # chat → when its last status post or edit went out
        self._quiet: dict[str, float] = {}  # chat → no status call before this (a 429's retry_after)
        out.progress = self

    @property
    def enabled(self) -> bool:
        return self.after_s > 0 and isinstance(self.out.translator, StatusPoster)

    @property
    def period_s(self) -> float:
        """How often :meth:`tick` runs."""
        return min(1.0, max(0.05, min(self.after_s or 1.0, self.every_s) / 4))

    # --- durable markers (the journal slot of the turn) -----------------------------------------------
    @staticmethod
    def _key(slot: int) -> str:
        return f"status#{slot % RING}"

    async def _mark(self, turn_id: str, live: Live, message_id: str) -> bool:
        state = self.out.state
        slot = state.pending.get(turn_id) if state is not None else None
        value = json.dumps([slot, turn_id, round(live.started, 3), message_id])
        if state is None or slot is None or len(value) > MAX_MARKER:
            return False
        await asyncio.to_thread(state.put, self._key(slot), value)
        return True

    async def load(self) -> None:
        """After a (re)start: the status messages of turns still owed a reply (edited on, then deleted)."""
        state = self.out.state
        if state is None or not self.enabled:
            return
        for turn_id, slot in list(state.pending.items()):
            if turn_id in self.live:
                continue
            raw = await asyncio.to_thread(state.get, self._key(slot))
            try:
                at, tid, started, mid = json.loads(raw or "[]")
            except (ValueError, TypeError):
                continue
            info = await self.out.info(turn_id) if (at, tid) == (slot, turn_id) and mid else None
            if info is not None:
                self.live[turn_id] = Live(info.channel_key, info.message_id, float(started), str(mid))

    # --- the turn stream -------------------------------------------------------------------------------
    async def on_event(self, ev: lanes_msg.StreamEvent) -> None:
        if not self.enabled:
            return
        live = self.live.get(ev.turn_id)
        if ev.kind == lanes_msg.TURN_STARTED and live is None:  # a turn started again keeps its status
            info = await self.out.info(ev.turn_id)
            if info is not None and self.out.state is not None and ev.turn_id in self.out.state.pending:
                self.live[ev.turn_id] = Live(info.channel_key, info.message_id, self.clock())
        elif live is None:
            return
        elif ev.kind == TurnEventKind.TOOL_START:
            live.tool = str(ev.data.get("name") or "")[:64]
        elif ev.kind == TurnEventKind.TOOL_END:
            live.tool = ""
        elif ev.kind == lanes_msg.TURN_DONE:
            live.ended = True  # no more edits; deleted once the answer is settled

    def _text(self, turn_id: str, live: Live, now: float) -> str:
        return status_text(now - live.started, live.tool, bool(self.out.approvals.of_turn(turn_id)))

    # --- posting and editing ---------------------------------------------------------------------------
    async def tick(self) -> None:
        """Post the status of each turn past the threshold, edit the others' when due (per chat)."""
        if not self.enabled:
            return
        now = self.clock()
        for turn_id, live in list(self.live.items()):
            chat = live.channel_key
            if live.ended or live.busy or live.message_id == MAYBE or self._quiet.get(chat, 0.0) > now:
                continue
            if not live.message_id:
                due = now - live.started >= self.after_s and self.ledger is not None
            else:
                due = now - self._edited.get(chat, 0.0) >= self.every_s
            if due and self._text(turn_id, live, now) != live.shown:
                live.busy = True
                self.out.spawn(self._update(turn_id, live))

    async def _update(self, turn_id: str, live: Live) -> None:
        try:
            async with live.lock:
                if not live.ended:
                    await (self._edit(turn_id, live) if live.message_id else self._post(turn_id, live))
        finally:
            live.busy = False

    async def _post(self, turn_id: str, live: Live) -> None:
        assert self.ledger is not None
        op = status_operation_id(turn_id)
        if await asyncio.to_thread(self.ledger.reserve, op) is not None:
            live.message_id = MAYBE  # this process posted it already (or may have)
            return
        outcome: Any = "unknown"
        try:
            if not await self._mark(turn_id, live, MAYBE):  # durable first: a kill never posts a second one
                outcome = None
                return
            text = self._text(turn_id, live, self.clock())
            translator: StatusPoster = self.out.translator  # type: ignore[assignment]
            try:
                mid = await translator.send_status(live.channel_key, text, reply_to=live.reply_to)
            except (RateLimited, NotPosted, Rejected) as exc:  # nothing was posted
                outcome = None
                self._refused(live, exc)
                await self._mark(turn_id, live, live.message_id)
                return
            except PlatformError as exc:  # it may have been posted: no more for this turn
                log.info("%s status of %s maybe posted: %s", self.out.platform, turn_id, exc)
                live.message_id = MAYBE
                return
            faults.fault("messengers.after_status_post")  # posted; its id not recorded
            live.message_id, live.shown = mid, text
            self._edited[live.channel_key] = self.clock()
            outcome = messengers_msg.MessageSent(
                platform=self.out.platform, message_id=mid, message_ids=[mid]
            )
            await self._mark(turn_id, live, mid)
        except GeodeError as exc:  # the store is restarting: the marker says MAYBE, or nothing was posted
            log.info("%s status of %s: %s", self.out.platform, turn_id, exc)
            live.message_id = live.message_id or MAYBE
        finally:
            await asyncio.to_thread(self.ledger.record, op, outcome)

    def _refused(self, live: Live, exc: PlatformError) -> None:
        if isinstance(exc, RateLimited):
            self._quiet[live.channel_key] = self.clock() + exc.retry_after_s
        elif isinstance(exc, Rejected):
            live.message_id = MAYBE  # refused for good (no such chat): no status for this turn
            log.info("%s status refused: %s", self.out.platform, exc)

    async def _edit(self, turn_id: str, live: Live) -> None:
        now = self.clock()
        text = self._text(turn_id, live, now)
        self._edited[live.channel_key] = now
        translator: StatusPoster = self.out.translator  # type: ignore[assignment]
        try:
            await translator.edit_text(live.channel_key, live.message_id, text)
        except RateLimited as exc:  # skipped; no status call in this chat for its retry_after
            self._quiet[live.channel_key] = now + exc.retry_after_s
        except PlatformError as exc:
            log.info("%s status edit skipped: %s", self.out.platform, exc)
        else:
            live.shown = text

    # --- the end ---------------------------------------------------------------------------------------
    async def finish(self, turn_id: str) -> None:
        """The turn's reply is settled (its final answer posted, or not): delete its status message."""
        live = self.live.pop(turn_id, None)
        if live is None:
            return
        async with live.lock:  # a post under way ends first
            live.ended = True
            if live.message_id and live.message_id != MAYBE:
                translator: StatusPoster = self.out.translator  # type: ignore[assignment]
                try:
                    await translator.delete(live.channel_key, live.message_id)
                except PlatformError as exc:
                    log.info("%s status of %s not deleted: %s", self.out.platform, turn_id, exc)
