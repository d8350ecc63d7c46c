"""The scheduler child's ports over the bus (:mod:`geode.schedule.ports`): lanes (submit a job occurrence's
AUTOMATION turn under its derived turn id, learn from its stored record that it ended) and the chat (the
executor's receipted ``messenger.deliver``, the path every chat reply takes)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from geode import faults
from geode.protocol import lanes as lanes_msg
from geode.protocol import messengers as messengers_msg
from geode.protocol.errors import GeodeError, RequestTimeout, Unavailable
from geode.protocol.transport import Transport
from geode.records.models import ReceiptState, TurnState
from geode.records.schedule_models import OccurrenceRow
from geode.records.store_client import StoreClient
from geode.schedule.jobs import Job
from geode.schedule.ports import Delivery, Reconciled, TurnEnd
from geode.sessions.automation import job_session_id
from geode.sessions.modes import AUTOMATION_ORIGIN
from geode.telemetry import spans

TRANSIENT = "receipt store unavailable"  # the executor's not_sent before anything was admitted
Settings = Callable[[Job, str], dict[str, Any]]  # (job, occurrence id) -> lanes.submit settings


def submit_retrying(transport: Transport, sub: lanes_msg.Submit, attempts: int = 3) -> None:
    """``lanes.submit`` of an automation turn (a scheduled occurrence's, a webhook intake's), tried again
    under the same turn id after a timeout or an unavailable lanes (lanes admits a turn id once); the last
    failure is raised: the caller tries again at its next pass."""
    delay = 0.2
    for attempt in range(attempts):
        try:
            transport.call("lanes", lanes_msg.SUBMIT, sub, session=sub.session_id, timeout_s=5.0)
            return
        except (RequestTimeout, Unavailable):
            if attempt == attempts - 1:
                raise
            time.sleep(delay)
            delay *= 2


class BusTurns:
    """Lanes for the driver: ``submit`` is idempotent by turn id (a retry after a timeout: the same turn)."""

    def __init__(self, transport: Transport, store: StoreClient, settings: Settings) -> None:
        self.transport, self.store, self.settings = transport, store, settings

    def submit(self, job: Job, row: OccurrenceRow) -> None:
        settings = self.settings(job, row.occurrence_id)
        sub = lanes_msg.Submit(
            turn_id=row.turn_id,
            session_id=str(settings["session_id"]),
            mode="AUTOMATION",
            origin=AUTOMATION_ORIGIN,
            input={"text": job.prompt, "schedule": {"job": job.name, "occurrence": row.occurrence_id}},
            settings=settings,
        )
        attrs = {
            "geode.job": job.name,
            "geode.occurrence_id": row.occurrence_id,
            "geode.turn_id": row.turn_id,
        }
        with spans.span("schedule.occurrence", attrs, root=True):  # the turn's trace starts here
            submit_retrying(self.transport, sub)

    def ended(self, turn_id: str) -> TurnEnd | None:
        rec = self.store.get_turn(turn_id)
        if rec is None or rec.state != TurnState.DONE:
            return None
        faults.fault("scheduler.after_turn_end")
        outcome = rec.outcome or {}
        text = outcome.get("text")
        reason = str(outcome.get("termination_reason") or "unknown")
        return TurnEnd(termination_reason=reason, text=text if isinstance(text, str) else "")


class BusChat:
    """The receipted post of a job's reply through the executor (``messenger.deliver``); a reconciled
    receipt read from the store."""

    def __init__(self, transport: Transport, session_key: bytes, store: StoreClient) -> None:
        self.transport, self.session_key, self.store = transport, session_key, store

    def reconciled(self, operation_id: str) -> Reconciled | None:
        rec = self.store.get_receipt(operation_id)
        if (
            rec is None
            or rec.state != ReceiptState.RECONCILED
            or rec.outcome not in ("applied", "not_applied")
        ):
            return None
        by = "observation" if rec.reconciled_by == "observation" else "operator"
        return Reconciled(posted=rec.outcome == "applied", by=by)

    def post(self, job: Job, row: OccurrenceRow, text: str, *, operation_id: str) -> Delivery:
        if job.deliver is None:
            raise ValueError(f"job {job.name!r} has no delivery chat")
        req = messengers_msg.DeliverReply(
            operation_id=operation_id,
            session_id=job_session_id(job, row.occurrence_id, self.session_key),
            turn_id=row.turn_id,
            channel=job.deliver.destination,
            text=text[: 64 * 1024],
        )
        faults.fault("scheduler.before_reply")
        try:
            out = self.transport.call("executor", messengers_msg.DELIVER, req, timeout_s=90.0)
        except GeodeError as exc:  # the executor or the messengers child is down or slow: try again
            return Delivery(state="deferred", reason=exc.message[:500])
        got = messengers_msg.Delivered.model_validate(out)
        if got.state in ("posted", "replayed"):
            faults.fault("scheduler.after_reply_posted")
            return Delivery(state="posted")
        if got.state == "uncertain":
            faults.fault("scheduler.after_reply_uncertain")
            return Delivery(state="uncertain", reason=got.reason or "the reply's receipt is uncertain")
        if got.reason.startswith(TRANSIENT):  # nothing admitted: a later try may post
            return Delivery(state="deferred", reason=got.reason)
        # refused before posting and settled so (a retry of this operation id replays the refusal)
        return Delivery(state="refused", reason=got.reason or "not sent")
