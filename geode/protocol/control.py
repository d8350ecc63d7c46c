"""Messages of the control area: the thin CLI ↔ control socket (lanes' side: :mod:`geode.protocol.lanes`).

CLI frames are ordinary envelopes (msgpack, 1 MiB cap) on ``$GEODE_HOME/cli.sock``. The client's requests
(``cli.*``) get one reply each; the server pushes ``cli.event`` casts (a session's stream, ordered by
``seq``; several at once as one ``cli.events`` to a client that said ``event_batches``) and ``cli.notice``
casts (a lanes restart: catch up now).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from geode.protocol.catalog import message
from geode.protocol.lanes import Cancelled, Decision, Ok, StreamEvent, StreamEvents

CONTROL_PROTOCOL = "geode.control.v1"
FEATURES = (
    "request_correlation",
    "stable_events",
    "attach",
    "request_cancellation",
    "session_model_config",
    "event_batches",  # the client takes ``cli.events`` (several stream events in one frame)
)


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
    mode: Literal["IPC", "REPL", "HEADLESS"] = "IPC"  # REPL: terminal and tree in one process; HEADLESS: MCP
    time_budget_s: float | None = Field(default=None, gt=0, le=86_400)  # None: the mode's default
    # HEADLESS only (`geode mcp`): who asks, recorded on a session it starts ("uid:<n>" over stdio,
    # "token:<hash>" over HTTP); such a connection resumes and attaches only sessions of the same creator
    creator: str | None = Field(default=None, pattern=r"^(uid:[0-9]{1,10}|token:[0-9a-f]{32})$")


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
    # chosen by the client up front, so a prompt re-sent after a lost reply finds the same turn (lanes'
    # submit is idempotent by turn id); None: control picks one
    turn_id: str | None = Field(default=None, pattern=r"^t-[0-9a-f]{16,32}$")
    compact: bool = False  # the chat's /compact: the turn only compacts the session (geode.loop.compact_now)


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
    # no_terminal: nobody could be asked (`geode ask` without a terminal): never reported as a person's "n"
    reason: Literal["user", "no_terminal"] = "user"


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


class Notice(BaseModel):
    """Pushed by control: ``lanes_restarted`` (a new lanes answers; replay from your last seq now)."""

    what: Literal["lanes_restarted"]
    incarnation: int = 0


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


class SetModel(BaseModel):
    """The chat's ``/model``: this connection's next turns use this exact model id."""

    model: str = Field(min_length=1, max_length=128)


class ModelSet(BaseModel):
    model: str
    provider: str


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
MODEL = message("cli.model", SetModel, ModelSet)
CLI_EVENT = message("cli.event", StreamEvent, None)
CLI_EVENTS = message("cli.events", StreamEvents, None)
CLI_NOTICE = message("cli.notice", Notice, None)
