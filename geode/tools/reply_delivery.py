"""``messenger.deliver``: a turn's reply posted to its chat at most once, as a receipted effect.

The executor admits a receipt under the caller's operation id (derived from the turn id), asks the
messengers child to post, and commits what was posted. A retry after any crash finds the same receipt:
committed → nothing is posted again (``replayed``); admitted or uncertain → ``uncertain`` (listed by
``geode receipts --uncertain``).

Reply receipts live in their own quarantine scope (``<session>#replies``, one step for every reply), so a
reply is never held back by an uncertain tool effect of its session, and an uncertain reply blocks neither
the session's tools nor the chat's later replies.
"""

from __future__ import annotations

import logging
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


class ReceiptPort(Protocol):
    def admit(
        self, operation_id: str, identity: ReceiptIdentity, *, owner: str, effect: str = "", attempt: str = ""
    ) -> Any: ...
    def commit(self, operation_id: str, result: dict[str, Any]) -> None: ...
    def mark_uncertain(self, operation_id: str, reason: str) -> None: ...


class MessengersLost(Unavailable):
    """The messengers child exited with a send in flight: the post may or may not have happened."""


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
    ) -> None:
        self.records = records
        self.transport = transport
        self.owner = owner
        self.target = target
        self.send_timeout_s = send_timeout_s

    def deliver(self, b: messengers_msg.DeliverReply) -> messengers_msg.Delivered:
        op = b.operation_id
        identity = ReceiptIdentity(
            session_id=reply_scope(b.session_id),
            turn_id=b.turn_id,
            step_id=STEP,
            tool_name=TOOL_NAME,
            fingerprint=fingerprint({"tool_name": TOOL_NAME, "channel": b.channel, "turn_id": b.turn_id}),
        )
        try:
            admitted = self.records.admit(op, identity, owner=self.owner, effect="external")
        except GeodeError as exc:  # nothing began: the caller may try again later
            return messengers_msg.Delivered(
                state="not_sent", reason=f"receipt store unavailable: {exc.message}"
            )
        if admitted.kind is AdmitKind.REPLAY:
            stored = admitted.result or {}
            if not stored.get("posted", False):
                return messengers_msg.Delivered(state="not_sent", reason=str(stored.get("reason", "")))
            return messengers_msg.Delivered(state="replayed", message_ids=list(stored.get("message_ids", [])))
        if admitted.kind is AdmitKind.UNCERTAIN:
            return messengers_msg.Delivered(state="uncertain", reason=admitted.reason)
        if admitted.kind is AdmitKind.CONFLICT:
            return messengers_msg.Delivered(state="not_sent", reason=admitted.reason)
        fault("executor.reply_after_admit")
        return self._send(b)

    def _send(self, b: messengers_msg.DeliverReply) -> messengers_msg.Delivered:
        body = messengers_msg.SendMessage(
            channel=b.channel,
            recipient=b.channel.split(":", 1)[-1],
            text=b.text,
            idempotency_key=b.operation_id,
            session_id=b.session_id,
            reply_to=b.reply_to,
        )
        try:
            reply = self.transport.call(self.target, messengers_msg.SEND, body, timeout_s=self.send_timeout_s)
        except (MessengersLost, RequestTimeout) as exc:  # the post may have happened: never retried blindly
            return self._uncertain(b.operation_id, exc.message)
        except (BadRequest, Unavailable) as exc:  # refused before posting (unbound chat, no platform)
            return self._settle(b.operation_id, posted=False, reason=exc.message)
        except GeodeError as exc:  # the handler failed mid-way: the platform may have accepted part of it
            return self._uncertain(b.operation_id, exc.message)
        fault("executor.reply_after_send")
        sent = messengers_msg.MessageSent.model_validate(reply)
        ids = sent.message_ids or ([sent.message_id] if sent.message_id else [])
        return self._settle(b.operation_id, posted=True, message_ids=ids)

    def _settle(
        self, op: str, *, posted: bool, message_ids: list[str] | None = None, reason: str = ""
    ) -> messengers_msg.Delivered:
        result = {"posted": posted, "message_ids": message_ids or [], "reason": reason[:500]}
        try:
            self.records.commit(op, result)
        except GeodeError as exc:
            if not posted:  # nothing was posted; the admitted receipt keeps a retry from posting blindly
                log.warning("reply %s: not sent, and the receipt could not be settled: %s", op, exc.message)
                return messengers_msg.Delivered(state="not_sent", reason=reason)
            return self._uncertain(op, f"posted, but the receipt could not be committed ({exc.message})")
        if posted:
            return messengers_msg.Delivered(state="posted", message_ids=message_ids or [])
        log.warning("reply %s not sent: %s", op, redact_text(reason, 300))
        return messengers_msg.Delivered(state="not_sent", reason=reason)

    def _uncertain(self, op: str, why: str) -> messengers_msg.Delivered:
        reason = f"the post's outcome is unknown: {why}"
        try:
            self.records.mark_uncertain(op, reason)
        except GeodeError as exc:  # the store also marks a dead owner's receipts
            log.warning("reply %s: could not mark uncertain: %s", op, exc.message)
        log.warning("reply %s uncertain: %s", op, redact_text(why, 300))
        return messengers_msg.Delivered(state="uncertain", reason=reason)
