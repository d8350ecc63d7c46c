"""``messenger.deliver``: a turn's reply posted to its chat at most once, as a receipted effect.

The executor admits a receipt under the caller's operation id (derived from the turn id), asks the
messengers child to post, and commits what was posted. A retry after any crash finds the same receipt:
committed → nothing is posted again (``replayed``); admitted or uncertain → ``uncertain`` (listed by
``geode receipts --uncertain``).

A post the platform refused for now (a 429, a 5xx, no connection: ``unavailable`` with a retry hint) is
known not posted: its receipt is committed ``{"posted": false, "retry_at": T}`` and the answer is
``deferred``. Asked again at T, the next attempt is a new receipt ``<operation id>~<n>`` that the store
admits only after its predecessor is committed so (``after``): the attempts form a chain, at most one of
them posts, and a kill anywhere leaves either a committed link (retried when due) or an uncertain one
(never retried blindly). An uncertain link that the messengers child's observation pass looked for in the
chat and did not find (reconciled ``not_applied`` by observation) is owed again: the next attempt follows it
at once. One reconciled by an operator is the operator's (``applied`` replays, ``not_applied`` is not sent).
A refusal for good (``bad_request``: chat gone, bot removed) is ``not_sent``.

Reply receipts live in their own quarantine scope (``<session>#replies``, one step for every reply), so a
reply is never held back by an uncertain tool effect of its session, and an uncertain reply blocks neither
the session's tools nor the chat's later replies.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from geode.faults import fault
from geode.protocol import messengers as messengers_msg
from geode.protocol.errors import BadRequest, GeodeError, RequestTimeout, Unavailable
from geode.protocol.transport import Transport
from geode.records.models import REPLY_STEP, REPLY_TOOL, AdmitKind, ReceiptIdentity
from geode.redaction import fingerprint, redact_text

log = logging.getLogger(__name__)
TOOL_NAME = REPLY_TOOL
STEP = REPLY_STEP
BY_OBSERVATION = "observation"  # a reconciliation GEODE made by looking (geode.records.receipts)
STORE_RETRY_S = 5.0  # the receipt store did not answer an admission: the reply is asked again after this


class ReceiptPort(Protocol):
    def admit(
        self,
        operation_id: str,
        identity: ReceiptIdentity,
        *,
        owner: str,
        effect: str = "",
        attempt: str = "",
        after: str = "",
    ) -> Any: ...
    def commit(self, operation_id: str, result: dict[str, Any]) -> None: ...
    def mark_uncertain(self, operation_id: str, reason: str) -> None: ...


def _reconciled(stored: dict[str, Any]) -> str:
    """Why a reconciled reply receipt replays as not sent (the store's reconciliation result)."""
    if "outcome" not in stored:
        return ""
    return f"reconciled {stored['outcome']} by {stored.get('by', '?')}: {stored.get('note', '')}".rstrip(": ")


class MessengersLost(Unavailable):
    """The messengers child exited with a send in flight: the post may or may not have happened."""


def attempt_operation_id(operation_id: str, attempt: int) -> str:
    """The receipt of a reply's ``attempt``: the first is the reply's operation id, a retry ``<id>~<n>``."""
    return operation_id if attempt <= 1 else f"{operation_id}~{attempt}"


def reply_scope(session_id: str) -> str:
    """The receipts' session field for a session's replies (its own quarantine scope)."""
    return f"{session_id}#replies"


class ReplyDelivery:
    """Serves ``messenger.deliver`` for one executor incarnation (``owner``). Thread-safe (no state)."""

    def __init__(
        self,
        records: ReceiptPort,
        transport: Transport,
        *,
        owner: str,
        target: str = "messengers",
        send_timeout_s: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        self.records = records
        self.transport = transport
        self.owner = owner
        self.target = target
        self.send_timeout_s = send_timeout_s

    def deliver(self, b: messengers_msg.DeliverReply) -> messengers_msg.Delivered:
        identity = ReceiptIdentity(
            session_id=reply_scope(b.session_id),
            turn_id=b.turn_id,
            step_id=STEP,
            tool_name=TOOL_NAME,
            fingerprint=fingerprint({"tool_name": TOOL_NAME, "channel": b.channel, "turn_id": b.turn_id}),
        )
        k = b.attempt
        while True:  # walk the chain of attempts to the open one (each a receipt; see the module docstring)
            op = attempt_operation_id(b.operation_id, k)
            after = attempt_operation_id(b.operation_id, k - 1) if k > 1 else ""
            try:
                admitted = self.records.admit(op, identity, owner=self.owner, effect="external", after=after)
            except GeodeError as exc:  # nothing began: asked again a little later
                why = f"receipt store unavailable: {exc.message}"
                return messengers_msg.Delivered(
                    state="deferred", reason=why, retry_at=self.clock() + STORE_RETRY_S, attempt=k
                )
            if admitted.kind is AdmitKind.REPLAY:
                stored = admitted.result or {}
                if stored.get("posted", stored.get("external_effect_applied", False)):  # or reconciled so
                    ids = list(stored.get("message_ids", []))
                    return messengers_msg.Delivered(state="replayed", message_ids=ids, attempt=k)
                if stored.get("outcome") == "not_applied" and stored.get("by") == BY_OBSERVATION:
                    k += 1  # looked for in the chat and absent: owed, the next attempt (store-checked)
                    continue
                retry_at = stored.get("retry_at")
                if not isinstance(retry_at, int | float):  # refused for good, or reconciled not applied
                    why = stored.get("reason") or _reconciled(stored)
                    return messengers_msg.Delivered(state="not_sent", reason=str(why), attempt=k)
                if retry_at > self.clock():  # not due yet: nothing is admitted
                    return messengers_msg.Delivered(
                        state="deferred", reason=str(stored.get("reason", "")), retry_at=retry_at, attempt=k
                    )
                k += 1  # due: the next attempt (admitted only after this one, by the store)
                continue
            if admitted.kind is AdmitKind.UNCERTAIN:
                return messengers_msg.Delivered(state="uncertain", reason=admitted.reason, attempt=k)
            if admitted.kind is AdmitKind.CONFLICT:
                return messengers_msg.Delivered(state="not_sent", reason=admitted.reason, attempt=k)
            fault("executor.reply_after_admit")
            return self._send(b, op, k)

    def _send(self, b: messengers_msg.DeliverReply, op: str, k: int) -> messengers_msg.Delivered:
        body = messengers_msg.SendMessage(
            channel=b.channel,
            recipient=b.channel.split(":", 1)[-1],
            text=b.text,
            idempotency_key=op,
            session_id=b.session_id,
            reply_to=b.reply_to,
        )
        try:
            reply = self.transport.call(self.target, messengers_msg.SEND, body, timeout_s=self.send_timeout_s)
        except (MessengersLost, RequestTimeout) as exc:  # the post may have happened: never retried blindly
            return self._uncertain(op, exc.message, k)
        except Unavailable as exc:  # known not posted (a 429, a 5xx, no connection): retried when due
            wait = messengers_msg.hinted_retry(exc.message)
            retry_at = None if wait is None else self.clock() + wait
            return self._settle(op, posted=False, reason=exc.message, retry_at=retry_at, attempt=k)
        except BadRequest as exc:  # refused for good before posting (unbound chat, chat gone, bot removed)
            return self._settle(op, posted=False, reason=exc.message, attempt=k)
        except GeodeError as exc:  # the handler failed mid-way: the platform may have accepted part of it
            return self._uncertain(op, exc.message, k)
        fault("executor.reply_after_send")
        sent = messengers_msg.MessageSent.model_validate(reply)
        ids = sent.message_ids or ([sent.message_id] if sent.message_id else [])
        return self._settle(op, posted=True, message_ids=ids, attempt=k)

    def _settle(
        self,
        op: str,
        *,
        posted: bool,
        message_ids: list[str] | None = None,
        reason: str = "",
        retry_at: float | None = None,
        attempt: int = 1,
    ) -> messengers_msg.Delivered:
        result: dict[str, Any] = {"posted": posted, "message_ids": message_ids or [], "reason": reason[:500]}
        if retry_at is not None:
            result["retry_at"] = retry_at
        try:
            self.records.commit(op, result)
        except GeodeError as exc:
            if not posted:  # nothing was posted; the admitted receipt keeps a retry from posting blindly
                log.warning("reply %s: not sent, and the receipt could not be settled: %s", op, exc.message)
                return messengers_msg.Delivered(state="not_sent", reason=reason, attempt=attempt)
            why = f"posted, but the receipt could not be committed ({exc.message})"
            return self._uncertain(op, why, attempt)
        if posted:
            return messengers_msg.Delivered(state="posted", message_ids=message_ids or [], attempt=attempt)
        if retry_at is not None:
            log.info("reply %s not posted, retried at %.0f: %s", op, retry_at, redact_text(reason, 300))
            deferred = messengers_msg.Delivered(state="deferred", reason=reason, retry_at=retry_at)
            return deferred.model_copy(update={"attempt": attempt})
        log.warning("reply %s not sent: %s", op, redact_text(reason, 300))
        return messengers_msg.Delivered(state="not_sent", reason=reason, attempt=attempt)

    def _uncertain(self, op: str, why: str, attempt: int = 1) -> messengers_msg.Delivered:
        reason = f"the post's outcome is unknown: {why}"
        try:
            self.records.mark_uncertain(op, reason)
        except GeodeError as exc:  # the store also marks a dead owner's receipts
            log.warning("reply %s: could not mark uncertain: %s", op, exc.message)
        log.warning("reply %s uncertain: %s", op, redact_text(why, 300))
        return messengers_msg.Delivered(state="uncertain", reason=reason, attempt=attempt)
