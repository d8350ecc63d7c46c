"""The store's routes for the webhook intake table (``store.webhook.*``): writes reply after their group
commit (deferred, inline like the other plain writes), reads answer from a read transaction."""

from __future__ import annotations

from pydantic import BaseModel

from geode.protocol import intake as m
from geode.protocol.dispatch import Handler, LaterHandler
from geode.protocol.later import Later
from geode.protocol.transport import Request
from geode.records.intake_models import IntakePage
from geode.records.intake_table import IntakeTable


class IntakeRoutes:
    """``plain`` (reads) and ``deferred`` (writes) for :class:`geode.protocol.dispatch.Dispatch`."""

    def __init__(self, table: IntakeTable) -> None:
        self.table = table
        self.plain: dict[str, Handler] = {
            m.GET: lambda b, r: m.IntakeReply(row=table.get(b.route, b.delivery_id)),
            m.BY_TURN: lambda b, r: m.IntakeReply(row=table.by_turn(b.turn_id)),
            m.OPEN: lambda b, r: table.open_page(b.after),
            m.RECENT: self._recent,
            m.COUNTS: lambda b, r: table.counts(),
        }
        self.deferred: dict[str, LaterHandler] = {
            m.RECORD: self._record,
            m.SUBMITTED: lambda b, r: self._reply(table.submitted_later(b.route, b.delivery_id)),
            m.ANSWERED: lambda b, r: self._reply(
                table.answered_later(b.route, b.delivery_id, b.termination_reason, b.answer_chars)
            ),
            m.DONE: lambda b, r: self._reply(table.done_later(b.route, b.delivery_id, b.delivery, b.reason)),
            m.REPLAY: lambda b, r: table.replay_later(
                b.delivery_id, route=b.route, queue_max=b.queue_max, client=b.client
            ),
        }

    @staticmethod
    def _reply(later: Later) -> Later:
        return later.map(lambda row: m.IntakeReply(row=row))

    def _record(self, b: m.RecordIntake, r: Request) -> Later:
        return self.table.record_later(
            b.route,
            b.dedupe_key,
            window_s=b.window_s,
            queue_max=b.queue_max,
            headers=b.headers,
            body=b.body,
            client=b.client,
            origin=b.origin,
            replay_of=b.replay_of,
            attempt=b.attempt,
        )

    def _recent(self, b: m.ListRecent, r: Request) -> BaseModel:
        return IntakePage(rows=self.table.recent(b.route, b.limit, with_body=b.with_body))
