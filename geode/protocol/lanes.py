"""Messages of the lanes area: entry paths (control, messengers) and the executor ↔ lanes.

Entry paths submit turns (``lanes.submit``), cancel, replay and query them; lanes relays each turn's stream to
the turn's origin as ``origin.event`` casts (several at once as one ``origin.events``) and routes executor
approval requests (``lanes.approval``) there.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from geode.protocol.catalog import message

Decision = Literal["y", "n", "a"]

# --- stream events (lanes → origin → CLI) -------------------------------------------------------------
# kind: the turn event kinds of geode.protocol.turns.TurnEventKind, plus these lane-level kinds:
TURN_QUEUED, TURN_STARTED, TURN_DONE = "turn_queued", "turn_started", "turn_done"
APPROVAL_REQUEST = "approval"


class StreamEvent(BaseModel):
    """One event of a session's stream. ``seq`` is assigned by lanes: strictly increasing per session,
    also across lanes restarts (it starts from the lanes start time), so ``attach(after_seq)`` is exact."""

    session_id: str
    turn_id: str
    seq: int = Field(ge=1)
    kind: str = Field(max_length=64)
    data: dict[str, Any] = Field(default_factory=dict)


STREAM_EVENTS_MAX = 64  # stream events in one ``origin.events`` frame


class StreamEvents(BaseModel):
    """Several stream events in one frame, in ``seq`` order (a worker's ``turn.events`` relayed as one)."""

    events: list[StreamEvent] = Field(min_length=1, max_length=STREAM_EVENTS_MAX)


_FIELDS = frozenset(("session_id", "turn_id", "seq", "kind", "data"))
_new, _set = object.__new__, object.__setattr__


def stream_event(session_id: str, turn_id: str, seq: int, kind: str, data: dict[str, Any]) -> StreamEvent:
    """``StreamEvent(...)`` for lanes' stream buffer, which numbers every event it relays or emits: its
    values are already typed (a worker's event validated as its frame came, lanes' own kinds and data), so
    the model is filled without a pydantic pass (~1.0 us of 2.5 an event, issue 34); ``data`` copied as
    validation would. A value the model would refuse (``seq`` < 1, ``kind`` over 64 characters, a wrong
    type) goes through the validating constructor: the same error as before."""
    if (
        type(seq) is not int
        or seq < 1
        or type(kind) is not str
        or len(kind) > 64
        or type(session_id) is not str
        or type(turn_id) is not str
        or type(data) is not dict
    ):
        return StreamEvent(session_id=session_id, turn_id=turn_id, seq=seq, kind=kind, data=data)
    ev = _new(StreamEvent)
    _set(
        ev,
        "__dict__",
        {"session_id": session_id, "turn_id": turn_id, "seq": seq, "kind": kind, "data": dict(data)},
    )
    _set(ev, "__pydantic_fields_set__", set(_FIELDS))  # its own set: pydantic adds to it on an attribute set
    _set(ev, "__pydantic_extra__", None)
    _set(ev, "__pydantic_private__", None)
    return ev


def event_wire(ev: StreamEvent) -> dict[str, Any]:
    """A stream event as a frame carries it, read off the validated model without pydantic's serializer:
    what ``catalog.dump(ev)`` gives (no field is ever None), ``data`` as it was validated (it came as
    msgpack, or was built by lanes: JSON-native). Lanes and control send each event as this (issue 34)."""
    return {
        "session_id": ev.session_id,
        "turn_id": ev.turn_id,
        "seq": ev.seq,
        "kind": ev.kind,
        "data": ev.data,
    }


class Ok(BaseModel):
    ok: bool = True


# --- control / messengers → lanes -----------------------------------------------------------------------


class Submit(BaseModel):
    """Queue a turn. Idempotent by ``turn_id`` (a retry after a timeout returns the existing record)."""

    turn_id: str = Field(min_length=1, max_length=128)
    session_id: str = Field(min_length=1, max_length=128)
    mode: str = "IPC"
    origin: str = Field(default="", max_length=128)  # peer name the stream goes to ("control", "messengers")
    input: dict[str, Any] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)  # the SessionSpec the worker builds its pair from
    resume: bool = False
    # the origin takes the turn's first stream events (queued, started: a turn that starts at once) in the
    # reply instead of an ``origin.events`` frame; it holds the session's live events until the reply is in
    reply_events: bool = False


class Submitted(BaseModel):
    turn_id: str
    session_id: str
    state: str
    position: int = 0
    events: list[StreamEvent] | None = None  # with ``Submit.reply_events``: the turn's events numbered so far


class Cancel(BaseModel):
    """Cancel a turn (queued: dropped and answered ``user_cancelled``; running: the worker stops it)."""

    turn_id: str | None = None
    session_id: str | None = None
    reason: str = Field(default="user", max_length=256)


class Cancelled(BaseModel):
    turn_id: str | None = None
    state: str = "none"  # none | queued_cancelled | cancellation_requested | already_done


# characters of an approval's detail: at most 512 KiB of UTF-8, inside the bus's 1 MiB frame with the rest of
# the event; a larger request is denied without asking (never shown cut as if whole)
APPROVAL_DETAIL_MAX = 128 * 1024


class ApprovalAsk(BaseModel):
    """Executor → lanes: ask the turn's origin for a decision; the reply is the decision (timeout → ``n``)."""

    approval_id: str = Field(min_length=1, max_length=128)
    session_id: str
    turn_id: str = ""
    tool_name: str = Field(max_length=128)
    # the whole request, unredacted (only this transient message carries it: never logged or recorded)
    detail: str = Field(default="", max_length=APPROVAL_DETAIL_MAX)
    safety_level: str = Field(default="write", max_length=32)
    timeout_s: float = Field(default=120.0, gt=0, le=3600)
    always_covers: str = Field(default="", max_length=256)  # what "always" covers; "" = not offered


class ApprovalDecision(BaseModel):
    approval_id: str
    decision: Decision
    # who decided: "user" (a person) | "timeout" | "disconnect" / "worker_died" (the origin or the turn's
    # worker is gone) | "cancelled" / "turn_ended" | "no_origin" (nobody to ask) | "duplicate_or_full" |
    # "no_terminal" (the attached client had no one to ask: `geode ask` without a terminal)
    reason: str = ""
    note: str = ""  # the person's words with a denial ("n: because …"), passed on to the model


class ApprovalReply(BaseModel):
    """Origin → lanes: the person's answer. Stale ids (nothing pending) are ignored."""

    approval_id: str = Field(min_length=1, max_length=128)
    decision: Decision
    note: str = Field(default="", max_length=1024)  # why (a denial's reason for the model)
    # no_origin: the origin had nobody attached to ask; no_terminal: the client attached had no one to ask
    reason: Literal["user", "no_origin", "no_terminal"] = "user"


class Replay(BaseModel):
    """Events of a session after ``after_seq`` from lanes' bounded buffer, plus recent durable outcomes."""

    session_id: str
    after_seq: int = Field(default=0, ge=0)


class Replayed(BaseModel):
    events: list[StreamEvent] = Field(default_factory=list)
    complete: bool = True  # False: the buffer no longer reaches back to after_seq
    outcomes: list[dict[str, Any]] = Field(default_factory=list)  # {turn_id, state, outcome} of recent turns
    running: str | None = None


class LanesStatus(BaseModel):
    """Lane wait times, queue lengths, held lanes and the worker pool."""


class TurnQuery(BaseModel):
    turn_id: str


SUBMIT = message("lanes.submit", Submit, Submitted)
CANCEL = message("lanes.cancel", Cancel, Cancelled)
APPROVAL = message("lanes.approval", ApprovalAsk, ApprovalDecision)
APPROVAL_REPLY = message("lanes.approval_reply", ApprovalReply, Ok)
REPLAY = message("lanes.replay", Replay, Replayed)
LANES_STATUS = message("lanes.status", LanesStatus)
TURN = message("lanes.turn", TurnQuery)
ORIGIN_EVENT = message("origin.event", StreamEvent, None)
ORIGIN_EVENTS = message("origin.events", StreamEvents, None)
