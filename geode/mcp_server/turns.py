"""What the MCP tools ask of a turn runner and what they answer: HEADLESS turn requests and their results.

Pure: no SDK and no bus here. The shell (``actors/cli/mcp_backend.py``) runs the turn through the daemon's
control socket, or an in-process tree when no daemon serves this ``GEODE_HOME``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MODE = "HEADLESS"  # every turn `geode mcp` submits: the default denylist holds, approvals are denied
DEFAULT_TIME_BUDGET_S = 120.0
MAX_TIME_BUDGET_S = 3600.0
MAX_PROMPT = 500_000
MAX_ID = 128  # session ids and model names

ProgressFn = Callable[[str], None]  # one line per turn event worth telling the MCP client
SessionFn = Callable[[str], None]  # told the turn's session id once it is known (before the turn runs)


def uid_creator(uid: int) -> str:
    """The creator of sessions started over stdio: the uid of the `geode mcp` process."""
    return f"uid:{uid}"


def token_creator(token: str) -> str:
    """The creator of sessions started over HTTP: a hash of the bearer token (never the token itself)."""
    digest = hashlib.sha256(b"geode.mcp.creator\x00" + token.encode("utf-8", "surrogatepass"))
    return f"token:{digest.hexdigest()[:32]}"


class HeadlessTurn(BaseModel):
    """One turn a client asked for: a new session (``session_id`` None) or a continued one."""

    model_config = ConfigDict(frozen=True)
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT)
    session_id: str | None = Field(default=None, max_length=MAX_ID)
    time_budget_s: float = Field(default=DEFAULT_TIME_BUDGET_S, gt=0, le=MAX_TIME_BUDGET_S)
    model: str | None = Field(default=None, max_length=MAX_ID)
    workspace: str  # the MCP client's root, else the server's cwd


# --- the tools' arguments: validated before a tool runs, and published as each tool's input schema -------
_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)  # an unknown argument is an error, not ignored
_PROMPT = Field(min_length=1, max_length=MAX_PROMPT, description="what to ask the agent")


class RunAgentArgs(BaseModel):
    model_config = _STRICT
    prompt: str = _PROMPT
    time_budget_s: float = Field(
        default=DEFAULT_TIME_BUDGET_S,
        gt=0,
        le=MAX_TIME_BUDGET_S,
        description=f"seconds the turn may run (more than 0, at most {MAX_TIME_BUDGET_S:g})",
    )
    model: str | None = Field(
        default=None, min_length=1, max_length=MAX_ID, description="a model id (default: GEODE's own)"
    )


class ContinueAgentArgs(BaseModel):
    model_config = _STRICT
    session_id: str = Field(
        min_length=1, max_length=MAX_ID, description="the session_id a run_agent result gave"
    )
    prompt: str = _PROMPT


class GetHealthArgs(BaseModel):
    model_config = _STRICT


TOOL_ARGS: dict[str, type[BaseModel]] = {
    "run_agent": RunAgentArgs,
    "continue_agent": ContinueAgentArgs,
    "get_health": GetHealthArgs,
}


def invalid_arguments(tool: str, exc: ValidationError) -> str:
    """The first problem of a tool call's arguments as one line (names the argument, never echoes a value)."""
    errors = exc.errors()
    err: dict[str, Any] = dict(errors[0]) if errors else {}
    where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        takes = ", ".join(TOOL_ARGS[tool].model_fields) or "no arguments"
        return f"invalid arguments: {tool} has no argument {where!r} (it takes {takes})"
    if kind == "missing":
        return f"invalid arguments: {tool} needs {where!r}"
    return f"invalid {where}: {one_line(str(err.get('msg', exc)))}"


def one_line(text: str) -> str:
    """``text`` on one line (an MCP error's reason is one line)."""
    return " ".join(text.split())


class AgentResult(BaseModel):
    """``run_agent`` / ``continue_agent``'s answer (structured content of the tool result)."""

    text: str = ""
    rounds: int = 0
    termination_reason: str | None = None
    error: str | None = None
    session_id: str | None = None


class TurnRunner(Protocol):
    """Runs a HEADLESS turn to its end (blocking) and reports the backend's health."""

    def run(self, turn: HeadlessTurn, progress: ProgressFn, on_session: SessionFn) -> dict[str, Any]:
        """The turn's result (``text``, ``rounds``, ``termination_reason``, ``error``, ``session_id``)."""
        ...

    def cancel(self, session_id: str) -> None:
        """Cancel the session's running turn (the MCP client cancelled its call or went away)."""
        ...

    def health(self) -> dict[str, Any]: ...


def agent_result(raw: dict[str, Any], session_id: str | None) -> AgentResult:
    """A runner's raw turn result as the tool's answer."""
    return AgentResult(
        text=str(raw.get("text") or ""),
        rounds=int(raw.get("rounds") or 0),
        termination_reason=raw.get("termination_reason"),
        error=None if raw.get("error") in (None, "") else str(raw.get("error")),
        session_id=str(raw.get("session_id") or session_id or "") or None,
    )


def failed(message: str, session_id: str | None = None) -> AgentResult:
    """A turn that could not be run at all (no daemon and no in-process tree, unknown session)."""
    return AgentResult(termination_reason=None, error=message, session_id=session_id)


def progress_line(event: dict[str, Any]) -> str | None:
    """A turn event as one progress message (None: not worth a notification, e.g. text deltas)."""
    kind, data = event.get("kind"), event.get("data") or {}
    if kind == "round_start":
        return f"round {data.get('round', '?')}"
    if kind == "tool_start":
        return f"tool {data.get('name', '?')}"
    if kind == "tool_end":
        return f"tool {data.get('name', '?')} " + (
            f"failed: {data['error']}" if data.get("error") else "done"
        )
    if kind in ("retry_wait", "llm_retry", "fallback", "verify"):
        return kind.replace("_", " ")
    if kind == "turn_start":
        return "turn started"
    return None
