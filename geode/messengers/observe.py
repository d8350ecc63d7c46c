"""Settling an ``uncertain`` chat reply by looking at the chat (issue 31 item 7).

A reply's receipt turns ``uncertain`` when the post may or may not have happened (the messengers child or the
executor died between the post and its commit). Where the platform lets the bot read the chat, a periodic pass
of the messengers child looks, once the receipt has been uncertain for a grace period (a post still in flight
lands meanwhile), for the post the reply would have made — Slack: the reply's operation id in the message's
``metadata`` — and records the verdict as a reconciliation ``reconciled_by = "observation"`` with evidence:
found → ``applied`` (it replays as posted); not found → ``not_applied``, and the answer is still owed: the
turn is journaled as owed again *before* the reconciliation (a kill between the two leaves a journaled turn
whose receipt is still uncertain: settled by the next pass), then delivered — the executor posts it as the
next attempt of the reply's receipt chain (``<operation id>~<n>``, admitted only after a predecessor
observed absent), never under the reconciled operation id. A platform that cannot read its history
(Telegram) keeps the receipt for the operator; each pass counts a platform's uncertain replies on its status
(``geode messengers``).

The operation id reaches the translator's post through :func:`posting_as` (a context variable), so the
platform-neutral ``send_text`` keeps its signature.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from geode.messengers.errors import PlatformError
from geode.messengers.replies import reply_text
from geode.messengers.schedule import PollerStatus
from geode.protocol.errors import GeodeError
from geode.records.models import Observation, Receipt, ReceiptState, TurnRecord

log = logging.getLogger(__name__)
T = TypeVar("T")
BY_OBSERVATION = "observation"
KIND = "chat_post"  # the Observation kind: before "absent", intended "posted"
ABSENT, POSTED = "absent", "posted"
METADATA_EVENT = "geode_reply"  # Slack message metadata event_type carrying the reply's operation id
SKEW_S = 5.0  # the search window opens this long before the receipt's admission (clock skew)
MAX_KNOWN = 10_000  # receipts whose turn was read (forgotten all at once past this)

_OPERATION: contextvars.ContextVar[str] = contextvars.ContextVar("geode_reply_operation", default="")


async def posting_as(operation_id: str, post: Awaitable[T]) -> T:
    """Await ``post`` with ``operation_id`` as the reply being posted (see :func:`posting_operation`)."""
    token = _OPERATION.set(operation_id)
    try:
        return await post
    finally:
        _OPERATION.reset(token)


def posting_operation() -> str:
    """The operation id of the reply being posted in this task ("" outside :func:`posting_as`)."""
    return _OPERATION.get()


def slack_metadata() -> dict[str, Any] | None:
    """The ``metadata`` of a Slack post: the reply's operation id (None outside a reply's post)."""
    op = posting_operation()
    return {"event_type": METADATA_EVENT, "event_payload": {"operation_id": op}} if op else None


@dataclass(frozen=True)
class LookFor:
    """The post an uncertain reply would have made."""

    operation_id: str
    channel_key: str
    reply_to: str  # the user's message the reply answered ("" when none)
    text: str  # the reply's text (its first part starts with it)
    since: float  # wall clock: the receipt's admission less SKEW_S; the post cannot be older


@runtime_checkable
class ReplyFinder(Protocol):
    """A translator that can read its chat: the found post's message id, or None when it is not there.
    Raises ``PlatformError`` when it could not look (the receipt stays uncertain; the next pass retries)."""

    async def find_reply(self, look: LookFor) -> str | None: ...


class ObserveStore(Protocol):
    """Blocking store calls (``geode.records.store_client.StoreClient`` has them)."""

    def list_receipts(
        self, *, session_id: str | None = None, uncertain_only: bool = False, limit: int = 200
    ) -> list[Receipt]: ...
    def get_turn(self, turn_id: str) -> TurnRecord | None: ...
    def reconcile(
        self, operation_id: str, *, outcome: str, by: str, note: str = "", evidence: Observation | None = None
    ) -> Receipt: ...


class Owed(Protocol):
    """The poller's reply journal (``geode.messengers.outbox.Outbox``): a reply owed again, then asked."""

    async def owe(self, turn_id: str) -> bool: ...
    async def deliver(self, turn_id: str, outcome: dict[str, Any] | None = None) -> None: ...


@dataclass
class PassResult:
    applied: int = 0
    not_applied: int = 0
    kept: int = 0  # still uncertain: in its grace, the platform cannot look, or looking failed


class Observer:
    """One platform's observation pass over the uncertain reply receipts of its chats."""

    def __init__(
        self,
        platform: str,
        translator: object,
        store: ObserveStore,
        status: PollerStatus,
        *,
        grace_s: float,
        clock: Callable[[], float] = time.time,
        owed: Owed | None = None,
    ) -> None:
        self.owed = owed  # a reply observed absent is journaled and delivered again here (None: not)
        self.platform = platform
        self.finder = translator if isinstance(translator, ReplyFinder) else None
        self.store = store
        self.status = status
        self.grace_s = grace_s
        self.clock = clock
        self._looks: dict[str, LookFor | None] = {}  # op id → what to look for (None: not this platform's)

    async def run_pass(self) -> PassResult:
        out = PassResult()
        receipts = await asyncio.to_thread(self.store.list_receipts, uncertain_only=True, limit=1000)
        for r in receipts:
            if r.state != ReceiptState.UNCERTAIN or not r.identity.is_chat_reply():
                continue
            look = await self._look_for(r)
            if look is None:  # another platform's reply, or its turn is gone
                continue
            verdict = await self._observe(r, look)
            if verdict == "applied":
                out.applied += 1
            elif verdict == "not_applied":
                out.not_applied += 1
            else:
                out.kept += 1
        self.status.uncertain_replies = out.kept
        return out

    async def _look_for(self, r: Receipt) -> LookFor | None:
        """What to look for (read once per receipt: each pass would otherwise read every turn again)."""
        if r.operation_id not in self._looks:
            if len(self._looks) >= MAX_KNOWN:
                self._looks.clear()
            self._looks[r.operation_id] = await self._read_look(r)
        return self._looks[r.operation_id]

    async def _read_look(self, r: Receipt) -> LookFor | None:
        rec = await asyncio.to_thread(self.store.get_turn, r.identity.turn_id)
        meta = rec.input.get("messenger") if rec is not None else None
        if rec is None or not isinstance(meta, dict) or meta.get("platform") != self.platform:
            return None
        return LookFor(
            operation_id=r.operation_id,
            channel_key=str(meta.get("channel_key", "")),
            reply_to=str(meta.get("message_id", "")),
            text=reply_text(rec.outcome or {}),
            since=r.created_at - SKEW_S,
        )

    async def _observe(self, r: Receipt, look: LookFor) -> str | None:
        """The verdict recorded, or None (kept uncertain)."""
        if self.finder is None or self.clock() < r.updated_at + self.grace_s:
            return None
        try:
            found = await self.finder.find_reply(look)
        except PlatformError as exc:
            log.info("%s reply %s: could not look at the chat: %s", self.platform, r.operation_id, exc)
            return None
        target = f"{self.platform}:{look.channel_key} reply to {look.reply_to or '-'}"
        evidence = Observation(
            kind=KIND, target=target, before=ABSENT, intended=POSTED, observed=POSTED if found else ABSENT
        )
        verdict = evidence.verdict(evidence.observed or ABSENT)
        note = (
            f"found the post in the chat: message {found}"
            if found
            else f"no post of it in the chat {self.grace_s:g} s after it turned uncertain"
        )
        if verdict == "not_applied" and self.owed is not None and not await self.owed.owe(r.identity.turn_id):
            return None  # the journal is not loaded yet: observed again on a later pass
        try:
            await asyncio.to_thread(
                self.store.reconcile,
                r.operation_id,
                outcome=verdict or "",
                by=BY_OBSERVATION,
                note=note,
                evidence=evidence,
            )
        except GeodeError as exc:  # reconciled meanwhile (an operator), or the store is away: next pass
            log.info("%s reply %s: not reconciled: %s", self.platform, r.operation_id, exc)
            return None
        log.info("%s reply %s settled by observation: %s (%s)", self.platform, r.operation_id, verdict, note)
        if verdict == "not_applied" and self.owed is not None:  # still owed: posted as the next attempt
            await self.owed.deliver(r.identity.turn_id)
        return verdict


async def observe_forever(observer: Observer, ready: asyncio.Event, period_s: float) -> None:
    """Run a pass every ``period_s`` while the platform is started (``ready``); a failed pass is logged."""
    while True:
        await ready.wait()
        try:
            await observer.run_pass()
        except Exception as exc:  # the store or the platform away: the next pass tries again
            log.warning("%s observation pass failed: %s", observer.platform, exc)
        await asyncio.sleep(period_s)


def observing(poller: Any, store: ObserveStore, grace_s: float) -> Callable[[], Coroutine[Any, Any, None]]:
    """The observation loop of a :class:`~geode.messengers.poller.Poller` (a runner's sidecar): its
    platform, translator, status and ``ready`` event; a pass every ``recover_every_s``, or every grace
    period when that is shorter (at least every 0.5 s)."""
    observer = Observer(
        poller.platform, poller.translator, store, poller.status, grace_s=grace_s, owed=poller.out
    )
    period_s = min(poller.settings.recover_every_s, max(grace_s, 0.5))
    return lambda: observe_forever(observer, poller.ready, period_s)
