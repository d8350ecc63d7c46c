"""IntakeClient: the webhooks child's typed calls to the intake table (``store.webhook.*``) over any
Transport, with the store client's retries: safe, because every intake write is idempotent (a retried
``record`` carries its call's attempt token, a repeated state step is a no-op)."""

from __future__ import annotations

import os
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from geode.protocol import intake as m
from geode.protocol.errors import BadRequest, GeodeError
from geode.protocol.transport import Transport
from geode.records.intake_models import (
    IntakeConflict,
    IntakeCounts,
    IntakePage,
    IntakeRow,
    RecordResult,
    StoreFull,
)
from geode.records.store_client import StoreClient

B = TypeVar("B", bound=BaseModel)


def _body(cls: type[B], **fields: Any) -> B:
    """A request body, or a one-line :class:`BadRequest` naming the first invalid field (never sent)."""
    try:
        return cls(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise BadRequest(f"invalid {cls.__name__} at {where or '<root>'}: {first.get('msg')}"[:300]) from None


def named(exc: GeodeError) -> GeodeError:
    """The intake table's refusal a reply carries (by its tag: :class:`StoreFull`, :class:`IntakeConflict`),
    or ``exc`` itself."""
    for cls in (StoreFull, IntakeConflict):
        if exc.message.startswith(f"{cls.tag}: "):
            return cls(exc.message)
    return exc


class IntakeClient(StoreClient):
    """A :class:`StoreClient` with the intake table's calls; ``attempts`` tries per call."""

    def __init__(self, transport: Transport, attempts: int = 3, **kw: Any) -> None:
        super().__init__(transport, attempts=attempts, **kw)

    def _intake(self, type_: str, body: Any) -> dict[str, Any]:
        try:
            return self._call(type_, body)
        except GeodeError as exc:
            raise named(exc) from None

    # writes -----------------------------------------------------------------------------------------
    def record(
        self,
        route: str,
        dedupe_key: str,
        *,
        window_s: float | None,
        queue_max: int,
        headers: dict[str, str],
        body: bytes,
        client: str,
        origin: str = "sender",
        replay_of: str = "",
    ) -> RecordResult:
        """One delivery's compare-and-set (see :class:`geode.protocol.intake.RecordIntake`); raises
        :class:`StoreFull` when the map is full (nothing recorded)."""
        req = _body(
            m.RecordIntake,
            route=route,
            dedupe_key=dedupe_key,
            window_s=window_s,
            queue_max=queue_max,
            headers=headers,
            body=body,
            client=client,
            origin=origin,  # validated by the model
            replay_of=replay_of,
            attempt=os.urandom(8).hex(),  # one token for this call and all its retries
        )
        return RecordResult.model_validate(self._intake(m.RECORD, req))

    def submitted(self, route: str, delivery_id: str) -> IntakeRow:
        return _row(self._intake(m.SUBMITTED, _body(m.IntakeRef, route=route, delivery_id=delivery_id)))

    def answered(
        self, route: str, delivery_id: str, termination_reason: str = "", answer_chars: int = 0
    ) -> IntakeRow:
        body = _body(
            m.RecordAnswered,
            route=route,
            delivery_id=delivery_id,
            termination_reason=termination_reason[: m.REASON_MAX],
            answer_chars=answer_chars,
        )
        return _row(self._intake(m.ANSWERED, body))

    def done(self, route: str, delivery_id: str, delivery: str = "none", reason: str = "") -> IntakeRow:
        body = _body(
            m.RecordDone,
            route=route,
            delivery_id=delivery_id,
            delivery=delivery,  # validated by the model
            reason=reason[: m.REASON_MAX],
        )
        return _row(self._intake(m.DONE, body))

    def replay(
        self, delivery_id: str, *, route: str = "", queue_max: int, client: str = "operator"
    ) -> RecordResult:
        """Re-run a stored delivery under ``<old>.replay-<n>``. A retry after a lost reply may record a
        second replay (an operator's action, not a sender's delivery)."""
        body = _body(m.ReplayIntake, delivery_id=delivery_id, route=route, queue_max=queue_max, client=client)
        return RecordResult.model_validate(self._intake(m.REPLAY, body))

    # reads ------------------------------------------------------------------------------------------
    def get(self, route: str, delivery_id: str) -> IntakeRow | None:
        reply = self._intake(m.GET, _body(m.IntakeRef, route=route, delivery_id=delivery_id))
        return m.IntakeReply.model_validate(reply).row

    def by_turn(self, turn_id: str) -> IntakeRow | None:
        return m.IntakeReply.model_validate(self._intake(m.BY_TURN, _body(m.ByTurn, turn_id=turn_id))).row

    def open_rows(self) -> list[IntakeRow]:
        """Every intake not done yet (recorded, submitted, answered), bodies included, page by page."""
        out: list[IntakeRow] = []
        after = ""
        while True:
            page = IntakePage.model_validate(self._intake(m.OPEN, _body(m.ListOpenIntakes, after=after)))
            out += page.rows
            if page.next_after is None:
                return out
            after = page.next_after

    def recent(
        self, route: str | None = None, limit: int = 50, *, with_body: bool = False
    ) -> list[IntakeRow]:
        body = _body(m.ListRecent, route=route, limit=limit, with_body=with_body)
        return IntakePage.model_validate(self._intake(m.RECENT, body)).rows

    def counts(self) -> IntakeCounts:
        return IntakeCounts.model_validate(self._intake(m.COUNTS, m.CountIntakes()))


def _row(reply: dict[str, Any]) -> IntakeRow:
    row = m.IntakeReply.model_validate(reply).row
    if row is None:  # the store always answers a state step with the row
        raise IntakeConflict("the store answered a state step without its row")
    return row
