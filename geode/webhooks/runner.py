"""The webhook runner: takes each recorded intake to its end (DESIGN §9). It submits the intake's AUTOMATION
turn to lanes under the intake's turn id, marks it submitted, appends a ``webhook.intake`` event to the turn's
session timeline, follows the turn (woken by lanes' ``turn_done`` origin event, and a periodic look at the
stored turn), records it answered, posts the answer to the route's ``deliver`` chat through the executor's
receipted ``messenger.deliver`` (operation id ``reply-<turn_id>``, so a reply posts at most once whatever is
retried; a turn that ended without an answer posts one line saying how it ended) and records it done with the
receipt's word (posted, refused, uncertain; a deferred post is retried with backoff). On start it takes over
every open intake: a recorded one is submitted again (lanes admits a turn id once), the others are followed.

Pure: the intake table, lanes, the chat and the timeline are injected ports (the webhooks child's are over
the bus, :mod:`geode.webhooks.bus_ports`; tests use fakes). Not thread-safe: one thread calls :meth:`tick`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from geode import faults
from geode.protocol.errors import GeodeError
from geode.records.intake_models import IntakeRow
from geode.records.models import TimelineEvent
from geode.redaction import redact
from geode.schedule.following import one_line, reply_operation_id
from geode.schedule.ports import Delivery, TurnEnd
from geode.webhooks.settings import RouteSpec
from geode.webhooks.template import render_prompt, write_body_file

log = logging.getLogger(__name__)
BACKOFF_S = (1.0, 2.0, 5.0, 15.0, 60.0)  # a deferred reply's retries (then every minute)
LOOK_S = 2.0  # how often a submitted turn's stored record is read without an origin event
NO_ANSWER = "The webhook run of route {route} ended without an answer ({reason})."  # told to the chat


class Intakes(Protocol):
    """The intake table's writes and reads the runner makes (:class:`IntakeClient`): idempotent, monotonic."""

    def open_rows(self) -> list[IntakeRow]: ...

    def submitted(self, route: str, delivery_id: str) -> Any: ...

    def answered(self, route: str, delivery_id: str, termination_reason: str, answer_chars: int) -> Any: ...

    def done(self, route: str, delivery_id: str, delivery: str, reason: str) -> Any: ...


class Lanes(Protocol):
    """Lanes and the stored turn: ``submit`` is idempotent by turn id and raises a ``GeodeError`` when lanes
    did not acknowledge it; ``ended`` is the turn's end once its record is done (None before)."""

    def submit(self, row: IntakeRow, text: str, settings: dict[str, Any]) -> None: ...

    def ended(self, turn_id: str) -> TurnEnd | None: ...


class Chat(Protocol):
    """The receipted post of a reply to ``destination`` (a bound chat) once per ``operation_id``."""

    def post(
        self, row: IntakeRow, destination: str, text: str, *, session_id: str, operation_id: str
    ) -> Delivery: ...


class Timeline(Protocol):
    def append(self, event: TimelineEvent) -> None: ...


TurnSettings = Callable[[RouteSpec, IntakeRow], dict[str, Any]]  # the lanes.submit settings of one intake
Workspace = Callable[[RouteSpec], Path]  # the route's workspace (a body file is written there)


@dataclass
class Followed:
    """An open intake this runner takes to its end."""

    row: IntakeRow
    session_id: str = ""  # known once its settings were composed (or read from its stored turn)
    end: TurnEnd | None = None
    attempts: int = 0  # deferred deliveries
    retry_at: float = 0.0  # monotonic: the next delivery attempt
    looked_at: float = 0.0  # monotonic: the last read of its stored turn


class Runner:
    """Every open intake, by turn id, and what the next :meth:`tick` does with each."""

    def __init__(
        self,
        intakes: Intakes,
        lanes: Lanes,
        chat: Chat,
        timeline: Timeline,
        *,
        routes: dict[str, RouteSpec],
        settings: TurnSettings,
        workspace: Workspace,
        clock: Callable[[], float],
        wall: Callable[[], float],
    ) -> None:
        self.intakes, self.lanes, self.chat, self.timeline = intakes, lanes, chat, timeline
        self.routes, self.settings, self.workspace = routes, settings, workspace
        self.clock, self.wall = clock, wall  # monotonic (retries, looks) and wall (timeline stamps)
        self.following: dict[str, Followed] = {}
        self.started = False
        self.ended_turns: set[str] = set()  # turn ids lanes said are done since the last tick
        self.last_error = ""

    # --- inputs -------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Take over every open intake (recorded: submitted again; the others followed)."""
        for row in self.intakes.open_rows():
            self.following.setdefault(row.turn_id, Followed(row))
        self.started = True

    def add(self, row: IntakeRow) -> None:
        """A new intake was recorded: its turn is submitted at the next tick."""
        self.following.setdefault(row.turn_id, Followed(row))

    def turn_done(self, turn_id: str) -> None:
        """Lanes said ``turn_id`` ended: look at it at the next tick."""
        if turn_id in self.following:
            self.ended_turns.add(turn_id)

    def set_routes(self, routes: dict[str, RouteSpec]) -> None:
        self.routes = routes

    def open_count(self) -> int:
        return len(self.following)

    # --- the tick -----------------------------------------------------------------------------------------
    def tick(self) -> None:
        """One pass over every open intake; a ``GeodeError`` of a port leaves that intake for the next one."""
        if not self.started:
            self.start()
        ended, self.ended_turns = self.ended_turns, set()
        now = self.clock()
        for turn_id, f in list(self.following.items()):
            state = f.row.state
            try:
                if state == "recorded":
                    self._submit(f)
                elif state == "submitted" and (turn_id in ended or now - f.looked_at >= LOOK_S):
                    self._look(f, now)
                elif state == "answered" and now >= f.retry_at:
                    self._deliver(f)
            except GeodeError as exc:  # the store, lanes or the executor restarting: try again next tick
                self.last_error = one_line(exc.message)
                if turn_id in ended:
                    self.ended_turns.add(turn_id)
                log.info("webhooks: intake %s: %s", turn_id, exc.message)
            except Exception as exc:  # never let one intake stop the others: say it, keep going
                self.last_error = one_line(f"{type(exc).__name__}: {exc}")
                log.exception("webhooks: intake %s failed", turn_id)
            if f.row.state == "done":
                del self.following[turn_id]

    def _route(self, f: Followed) -> RouteSpec | None:
        return self.routes.get(f.row.route)

    def _submit(self, f: Followed) -> None:
        row, route = f.row, self._route(f)
        if route is None:  # the route was removed by a reload before its turn was submitted
            reason = f"route {row.route!r} is no longer configured"
            self.intakes.answered(row.route, row.delivery_id, "route_removed", 0)
            self.intakes.done(row.route, row.delivery_id, "none", reason)
            f.row = row.model_copy(update={"state": "done"})
            log.warning("webhooks: intake %s of %s dropped: %s", row.delivery_id, row.route, reason)
            return
        settings = self.settings(route, row)
        f.session_id = str(settings["session_id"])
        self.lanes.submit(row, self._prompt(route, row), settings)
        faults.fault("webhooks.after_submit")
        self.intakes.submitted(row.route, row.delivery_id)
        f.row, f.looked_at = row.model_copy(update={"state": "submitted"}), self.clock()
        self.timeline.append(self._intake_event(f))

    def _prompt(self, route: RouteSpec, row: IntakeRow) -> str:
        body_obj: Any = None
        try:
            body_obj = json.loads(row.body) if row.body else None
        except ValueError:  # a route without json = true: only the headers' fields are selected
            body_obj = None
        body_file = None
        if route.body_file:  # named in the prompt relative to the turn's workspace
            ws = self.workspace(route)
            body_file = str(write_body_file(ws, row.delivery_id, row.body).relative_to(ws))
        return render_prompt(
            route, delivery_id=row.delivery_id, headers=row.headers, body_obj=body_obj, body_file=body_file
        )

    def _intake_event(self, f: Followed) -> TimelineEvent:
        row = f.row
        payload = {
            "route": row.route,
            "delivery_id": row.delivery_id,
            "turn_id": row.turn_id,
            "origin": row.origin,
            "replay_of": row.replay_of,
            "client": row.client,
            # the kept headers only (never auth/signature ones); "kept": a "headers" key is masked whole
            "kept": redact(dict(row.headers)),
            "body_bytes": len(row.body),
            "body_sha256": row.body_sha256,
        }
        return TimelineEvent(
            session_id=f.session_id,
            event_id=f"intake-{row.turn_id}",
            kind="webhook.intake",
            ts=self.wall(),
            payload=payload,
        )

    def _look(self, f: Followed, now: float) -> None:
        f.looked_at = now
        end = self.lanes.ended(f.row.turn_id)
        if end is None:
            return
        faults.fault("webhooks.after_turn_end")
        row = f.row
        self.intakes.answered(row.route, row.delivery_id, end.termination_reason, len(end.text))
        f.end, f.row = end, row.model_copy(update={"state": "answered"})
        self._deliver(f)

    def _deliver(self, f: Followed) -> None:
        row, route = f.row, self._route(f)
        if f.end is None:  # taken over in state answered: read the answer again
            f.end = self.lanes.ended(row.turn_id)
            if f.end is None:
                return
        destination = route.deliver.destination if route is not None and route.deliver is not None else ""
        if not destination:
            self._done(f, "none", "no delivery chat")
            return
        text = f.end.text.strip() or NO_ANSWER.format(route=row.route, reason=f.end.termination_reason)
        session_id = f.session_id or self._session_of(route, row)
        got = self.chat.post(
            row, destination, text, session_id=session_id, operation_id=reply_operation_id(row.turn_id)
        )
        if got.state == "deferred":
            f.attempts += 1
            f.retry_at = self.clock() + BACKOFF_S[min(f.attempts, len(BACKOFF_S)) - 1]
            log.info("webhooks: reply of %s deferred (%s)", row.turn_id, one_line(got.reason))
            return
        if got.state == "posted":
            faults.fault("webhooks.after_reply_posted")
        self._done(f, got.state, got.reason)

    def _session_of(self, route: RouteSpec | None, row: IntakeRow) -> str:
        if route is None:
            return row.turn_id
        return str(self.settings(route, row)["session_id"])

    def _done(self, f: Followed, delivery: str, reason: str) -> None:
        row = f.row
        self.intakes.done(row.route, row.delivery_id, delivery, one_line(reason) if reason else "")
        f.row = row.model_copy(update={"state": "done", "delivery": delivery})
