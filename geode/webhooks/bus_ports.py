"""The webhooks child's ports over the bus: the HTTP app's (:class:`BusIntake`: record an intake in the
store's intake table, hand a new one to the runner, read a status) and the runner's
(:mod:`geode.webhooks.runner`): lanes (submit an intake's
AUTOMATION turn under its turn id, origin ``webhooks`` so lanes streams its events to the child; learn from
its stored record that it ended), the chat (the executor's receipted ``messenger.deliver``, the path every
chat reply takes) and the session timeline (the store)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from geode.protocol import lanes as lanes_msg
from geode.protocol import messengers as messengers_msg
from geode.protocol.errors import GeodeError
from geode.protocol.transport import Transport
from geode.records.intake_client import IntakeClient
from geode.records.intake_models import IntakeRow, RecordResult
from geode.records.models import TimelineEvent, TurnState
from geode.records.store_client import StoreClient
from geode.schedule.bus_ports import TRANSIENT, submit_retrying
from geode.schedule.ports import Delivery, TurnEnd
from geode.telemetry import spans
from geode.webhooks.ports import StatusView, status_word
from geode.webhooks.settings import RouteSpec

ORIGIN = "webhooks"  # the child's bus name: lanes casts an intake turn's origin events there
REPLY_MAX = 64 * 1024


def turn_end(outcome: dict[str, Any] | None) -> TurnEnd:
    """A done turn record's outcome as the runner sees it (its reason and answer text)."""
    out = outcome or {}
    text = out.get("text")
    return TurnEnd(
        termination_reason=str(out.get("termination_reason") or "unknown"),
        text=text if isinstance(text, str) else "",
    )


class BusLanes:
    """``submit`` is idempotent by turn id (a retry after a timeout: the same turn); ``ended`` reads the
    stored turn record."""

    def __init__(self, transport: Transport, store: StoreClient) -> None:
        self.transport, self.store = transport, store

    def submit(self, row: IntakeRow, text: str, settings: dict[str, Any]) -> None:
        sub = lanes_msg.Submit(
            turn_id=row.turn_id,
            session_id=str(settings["session_id"]),
            mode="AUTOMATION",
            origin=ORIGIN,
            input={"text": text, "webhook": {"route": row.route, "delivery": row.delivery_id}},
            settings=settings,
        )
        attrs = {"geode.route": row.route, "geode.turn_id": row.turn_id}
        with spans.span("webhooks.intake", attrs, root=True):  # the turn's trace starts here
            submit_retrying(self.transport, sub)

    def ended(self, turn_id: str) -> TurnEnd | None:
        rec = self.store.get_turn(turn_id)
        if rec is None or rec.state != TurnState.DONE:
            return None
        return turn_end(rec.outcome)


class BusChat:
    """The receipted post of an intake's answer through the executor (``messenger.deliver``)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def post(
        self, row: IntakeRow, destination: str, text: str, *, session_id: str, operation_id: str
    ) -> Delivery:
        req = messengers_msg.DeliverReply(
            operation_id=operation_id,
            session_id=session_id,
            turn_id=row.turn_id,
            channel=destination,
            text=text[:REPLY_MAX],
        )
        try:
            out = self.transport.call("executor", messengers_msg.DELIVER, req, timeout_s=90.0)
        except GeodeError as exc:  # the executor or the messengers child is down or slow: try again
            return Delivery(state="deferred", reason=exc.message[:500])
        got = messengers_msg.Delivered.model_validate(out)
        if got.state in ("posted", "replayed"):
            return Delivery(state="posted")
        if got.state == "uncertain":
            return Delivery(state="uncertain", reason=got.reason or "the reply's receipt is uncertain")
        if got.reason.startswith(TRANSIENT):  # nothing admitted: a later try may post
            return Delivery(state="deferred", reason=got.reason)
        return Delivery(state="refused", reason=got.reason or "not sent")  # settled: a retry replays it


class BusTimeline:
    def __init__(self, store: StoreClient) -> None:
        self.store = store

    def append(self, event: TimelineEvent) -> None:
        self.store.append_timeline(event)


class BusIntake:
    """The HTTP app's port (:class:`geode.webhooks.ports.IntakePort`): the intake table through the store,
    a new intake handed to the runner (``recorded``: must not block), a status from the intake row and, once
    the turn ended, the stored turn's answer."""

    def __init__(
        self, intakes: IntakeClient, store: StoreClient, recorded: Callable[[IntakeRow], None]
    ) -> None:
        self.intakes, self.store, self.on_recorded = intakes, store, recorded

    def record(
        self, route: RouteSpec, dedupe_key: str, headers: dict[str, str], body: bytes, client: str
    ) -> RecordResult:
        return self.intakes.record(
            route.name,
            dedupe_key,
            window_s=route.dedupe_window_s,
            queue_max=route.queue_max,
            headers=headers,
            body=body,
            client=client,
        )  # the app's webhooks.after_intake fault point follows a new row (geode/webhooks/http_app.py)

    def recorded(self, row: IntakeRow) -> None:
        self.on_recorded(row)

    def status(self, turn_id: str) -> StatusView | None:
        row = self.intakes.by_turn(turn_id)
        if row is None:
            return None
        answer = None
        if row.state in ("answered", "done"):
            rec = self.store.get_turn(turn_id)
            if rec is not None and rec.outcome is not None:
                answer = turn_end(rec.outcome).text or None
        return StatusView(
            turn_id=turn_id,
            route=row.route,
            delivery_id=row.delivery_id,
            status=status_word(row.state),
            answer=answer,
            delivery=row.delivery,
            termination_reason=row.termination_reason,
        )
