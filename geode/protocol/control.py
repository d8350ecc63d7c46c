"""Messages of the control area: the thin CLI ↔ control socket, and control/messengers ↔ lanes.

CLI frames are ordinary envelopes (msgpack, 1 MiB cap) on ``$GEODE_HOME/cli.sock``. The client's requests
(``cli.*``) get one reply each; the server pushes ``cli.event`` casts (a session's stream, ordered by
``seq``).
Entry paths submit turns to lanes (``lanes.*``); lanes relays each turn's stream to the turn's origin as
``origin.event`` casts and routes executor approval requests there too.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from geode.protocol.catalog import message

CONTROL_PROTOCOL = "geode.control.v1"
FEATURES = ("request_correlation", "stable_events", "attach", "request_cancellation", "session_model_config")
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


class Submitted(BaseModel):
    turn_id: str
    session_id: str
    state: str
    position: int = 0


class Cancel(BaseModel):
    """Cancel a turn (queued: dropped and answered ``user_cancelled``; running: the worker stops it)."""

    turn_id: str | None = None
    session_id: str | None = None
    reason: str = Field(default="user", max_length=256)


class Cancelled(BaseModel):
    turn_id: str | None = None
    state: str = "none"  # none | queued_cancelled | cancellation_requested | already_done


class ApprovalAsk(BaseModel):
    """Executor → lanes: ask the turn's origin for a decision; the reply is the decision (timeout → ``n``)."""

    approval_id: str = Field(min_length=1, max_length=128)
    session_id: str
    turn_id: str = ""
    tool_name: str = Field(max_length=128)
    detail: str = Field(default="", max_length=2048)
    safety_level: str = Field(default="write", max_length=32)
    timeout_s: float = Field(default=120.0, gt=0, le=3600)


class ApprovalDecision(BaseModel):
    approval_id: str
    decision: Decision
    reason: str = ""  # "user" | "timeout" | "disconnect" | "cancelled" | "no_origin"
    note: str = ""  # the person's words with a denial ("n: because …"), passed on to the model


class ApprovalReply(BaseModel):
    """Origin → lanes: the person's answer. Stale ids (nothing pending) are ignored."""

    approval_id: str = Field(min_length=1, max_length=128)
    decision: Decision
    note: str = Field(default="", max_length=1024)  # why (a denial's reason for the model)


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

# --- thin CLI ↔ control socket ----------------------------------------------------------------------------


class Handshake(BaseModel):
    """First frame of a connection. Anything but handshake/exit/ping before it → ``not_ready``."""

    model_config = ConfigDict(extra="ignore")
    protocol_version: str = CONTROL_PROTOCOL
    features: list[str] = Field(default_factory=list, max_length=64)
    client_version: str = Field(default="", max_length=64)
    cwd: str = Field(default="", max_length=4096)
    is_tty: bool = False
    model: str | None = Field(default=None, max_length=128)
    session_id: str | None = Field(default=None, max_length=128)  # attach the connection to this session
    dangerously_skip_permissions: bool = False
    mode: Literal["IPC", "REPL"] = "IPC"  # REPL: the terminal and the whole tree share one process


class Welcome(BaseModel):
    protocol_version: str
    features: list[str]
    server_version: str
    connection_id: str
    session_id: str
    model: str
    provider: str
    workspace: str


class Prompt(BaseModel):
    text: str = Field(min_length=1, max_length=500_000)
    session_id: str | None = None


class PromptAccepted(BaseModel):
    turn_id: str
    session_id: str
    position: int = 0


class CliCancel(BaseModel):
    turn_id: str | None = None


class ApprovalResponse(BaseModel):
    approval_id: str = Field(min_length=1, max_length=128)
    decision: Decision
    note: str = Field(default="", max_length=1024)  # "n: because …": the reason goes to the model


class Resume(BaseModel):
    session_id: str | None = Field(default=None, max_length=128)
    continue_: bool = Field(default=False, alias="continue")

    model_config = ConfigDict(populate_by_name=True)


class Resumed(BaseModel):
    session_id: str
    message_count: int = 0
    status: str = "active"


class Attach(BaseModel):
    """Re-attach to a session's stream after a disconnect or daemon restart, from the last seq seen."""

    session_id: str = Field(min_length=1, max_length=128)
    after_seq: int = Field(default=0, ge=0)


class Attached(BaseModel):
    session_id: str
    replayed: int
    complete: bool
    outcomes: list[dict[str, Any]] = Field(default_factory=list)
    running: str | None = None


class Empty(BaseModel):
    """No fields."""

    model_config = ConfigDict(extra="ignore")


class Receipts(BaseModel):
    session_id: str | None = None
    uncertain_only: bool = False


class Reconcile(BaseModel):
    operation_id: str = Field(min_length=1, max_length=256)
    outcome: Literal["applied", "not_applied"]
    note: str = Field(default="", max_length=1024)


class Restart(BaseModel):
    child: str = Field(min_length=1, max_length=64)


HANDSHAKE = message("cli.handshake", Handshake, Welcome)
PROMPT = message("cli.prompt", Prompt, PromptAccepted)
CLI_CANCEL = message("cli.cancel", CliCancel, Cancelled)
APPROVAL_RESPONSE = message("cli.approval_response", ApprovalResponse, Ok)
RESUME = message("cli.resume", Resume, Resumed)
ATTACH = message("cli.attach", Attach, Attached)
EXIT = message("cli.exit", Empty, Ok)
PING = message("cli.ping", Empty, Ok)
STATUS = message("cli.status", Empty)
SESSIONS = message("cli.sessions", Empty)
RECEIPTS = message("cli.receipts", Receipts)
RECONCILE = message("cli.reconcile", Reconcile)
RESTART = message("cli.restart", Restart)
STOP = message("cli.stop", Empty)
CLI_EVENT = message("cli.event", StreamEvent, None)
