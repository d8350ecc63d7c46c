"""schedule_job: the model creates, lists and cancels scheduled jobs through the ``scheduler`` child.

Where it may run, the create check (before anyone is asked) and the approval text are the executor's
(:mod:`geode.tools.schedule_rule`). The handler sends ``schedule.add`` / ``schedule.list`` /
``schedule.show`` + ``schedule.remove`` (:mod:`geode.protocol.schedule`) through the executor's ``scheduler``
service: in the daemon, :class:`BusScheduler`. A created job is the model's (origin ``model``): it runs in the
creating session's workspace and never names a tool beyond DAEMON's list; cancel removes only such jobs,
and in a chat (DAEMON) only those that deliver to that chat, which is also all of the model's jobs it lists.
Every failure is one line, and says whether anything was stored.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel

from geode.protocol import schedule as sched
from geode.protocol.errors import GeodeError, NotFound, RequestTimeout, Unavailable
from geode.protocol.transport import Transport
from geode.schedule.jobs import JobError
from geode.sessions.modes import SessionMode
from geode.tools.handlers import ToolEnv, ToolFailure
from geode.tools.schedule_rule import model_job

SCHEDULER = "scheduler"  # the child's bus endpoint
PROMPT_SHOWN = 300  # a listed model job's prompt, cut to this many characters


class SchedulerLost(Unavailable):
    """The scheduler child exited with a request in flight: it may or may not have done it."""


class SchedulerPort(Protocol):
    """Sends one ``schedule.*`` request; raises the reply's error (``GeodeError``)."""

    def call(self, type_: str, body: BaseModel) -> dict[str, Any]: ...


class BusScheduler:
    """The ``scheduler`` child over the executor's bus."""

    def __init__(self, transport: Transport, target: str = SCHEDULER, timeout_s: float = 10.0) -> None:
        self.transport = transport
        self.target = target
        self.timeout_s = timeout_s

    def call(self, type_: str, body: BaseModel) -> dict[str, Any]:
        return self.transport.call(self.target, type_, body, timeout_s=self.timeout_s)


def _ask(port: SchedulerPort, type_: str, body: BaseModel, *, subject: str, done: str) -> dict[str, Any]:
    """One request; a refusal or a scheduler that is down is a one-line ToolFailure saying ``subject`` was
    not ``done``; no answer in time says that is unknown."""
    not_done = f"{subject} was not {done}"
    try:
        return port.call(type_, body)
    except (RequestTimeout, SchedulerLost) as exc:
        why = "exited" if isinstance(exc, SchedulerLost) else "did not answer in time"
        raise ToolFailure(
            f"The scheduler {why}: whether {subject} was {done} is unknown; check with action list.",
            "tool_unavailable",
        ) from None
    except Unavailable as exc:
        raise ToolFailure(
            f"The scheduler is not running ({exc.message}); {not_done}.", "tool_unavailable"
        ) from None
    except NotFound as exc:
        raise ToolFailure(f"{exc.message}; {not_done}.", "not_found") from None
    except GeodeError as exc:
        raise ToolFailure(f"The scheduler refused: {exc.message}; {not_done}.") from None


def _view(job: sched.JobView) -> dict[str, Any]:
    """One job as the model sees it: when, state, next instant; a model job's prompt too (an operator's
    prompt is the operator's, not shown to a chat)."""
    record = job.entry.job
    d = dict(record.definition) if record is not None else {}
    out: dict[str, Any] = {"name": job.entry.cursor.job_id, "origin": d.get("origin", "operator")}
    for key in ("cron", "every", "at", "tz", "deliver", "allowed_tools"):
        if d.get(key) is not None:
            out[key] = d[key]
    cursor = job.entry.cursor
    state = "disabled" if cursor.disabled else "paused" if cursor.paused or d.get("paused") else "active"
    out.update(state=state, next_instant=job.next_instant)
    if out["origin"] == "model" and isinstance(d.get("prompt"), str):
        out["prompt"] = d["prompt"][:PROMPT_SHOWN]
    return out


def _destination(definition: dict[str, Any]) -> str:
    """Where a stored job delivers, ``"<platform>:<channel_id>"`` ("" for none)."""
    deliver = definition.get("deliver")
    if isinstance(deliver, dict) and deliver.get("platform") and deliver.get("channel_id"):
        return f"{deliver['platform']}:{deliver['channel_id']}"
    return ""


def _chat(env: ToolEnv, nothing: str) -> str | None:
    """The chat a DAEMON turn is confined to (None at a terminal: IPC/REPL); refused when unknown."""
    if env.ctx.mode != SessionMode.DAEMON.value:
        return None
    rule = env.service("schedule_rule")
    try:
        if rule is None:
            raise GeodeError("Could not tell which chat this turn is from.")
        chat: str = rule.chat_of(env.ctx)
    except GeodeError as exc:
        raise ToolFailure(f"{exc.message} {nothing}", "tool_policy_denied") from None
    return chat


def _mine(job: sched.JobView, chat: str | None) -> bool:
    """Whether a listed job is shown to this turn: everything at a terminal; in a chat the operator's jobs
    (prompts hidden) and the model's jobs that deliver to this chat."""
    record = job.entry.job
    d = dict(record.definition) if record is not None else {}
    return chat is None or d.get("origin", "operator") != "model" or _destination(d) == chat


def _create(port: SchedulerPort, args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    try:
        spec = model_job(args, env.workspace)
    except JobError as exc:
        raise ToolFailure(f"{exc.message}. Nothing was scheduled.", "invalid_tool_input") from None
    body = sched.AddJob(
        job=spec.model_dump(mode="json", exclude_none=True),
        origin="model",
        workspace=str(env.workspace),
        session_id=env.ctx.session_id,
    )
    reply = sched.AddReply.model_validate(
        _ask(port, sched.ADD, body, subject=f"job {spec.name!r}", done="created")
    )
    view = _view(reply.job)
    return {"created": spec.name, **view, "workspace": str(env.workspace)}


def _cancel(port: SchedulerPort, name: str, chat: str | None) -> dict[str, Any]:
    shown = sched.ShowReply.model_validate(
        _ask(port, sched.SHOW, sched.ShowJob(name=name, limit=1), subject=f"job {name!r}", done="removed")
    )
    record = shown.job.entry.job
    if record is None or record.definition.get("origin") != "model":
        raise ToolFailure(
            f"Job {name!r} was defined by the operator; only `geode schedule rm` removes it. Nothing was "
            "removed.",
            "tool_policy_denied",
        )
    if chat is not None and _destination(dict(record.definition)) != chat:
        raise ToolFailure(
            f"Job {name!r} does not deliver to this chat ({chat}): a chat cancels only the model's jobs that "
            "deliver to it. Nothing was removed.",
            "tool_policy_denied",
        )
    reply = sched.RemoveReply.model_validate(
        _ask(port, sched.REMOVE, sched.RemoveJob(name=name), subject=f"job {name!r}", done="removed")
    )
    return {"cancelled": name, "removed": reply.removed}


def schedule_job(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    port: SchedulerPort | None = env.service("scheduler")
    if port is None and env.service("worker_host"):  # the scheduler is main's; this call did not go there
        raise ToolFailure(
            f"schedule_job is not available on worker host {env.service('worker_host')}: the scheduler "
            "runs on the main host, and this call is not routed there; ask on the main host. Nothing "
            "changed.",
            "tool_unavailable",
        )
    if port is None:
        raise ToolFailure(
            "Scheduling is unavailable here: no scheduler runs (only `geode serve` runs one, unless "
            "[schedule] enabled = false); nothing changed.",
            "tool_unavailable",
        )
    action = args.get("action")
    if action == "create":
        return _create(port, args, env)
    if action == "cancel":
        if not args.get("name"):
            raise ToolFailure("cancel needs the job's name. Nothing was removed.", "invalid_tool_input")
        return _cancel(port, str(args["name"]), _chat(env, "Nothing was removed."))
    chat = _chat(env, "Nothing was listed.")
    reply = sched.JobsReply.model_validate(
        _ask(port, sched.LIST, sched.ListJobs(), subject="the job list", done="read")
    )
    return {"jobs": [_view(j) for j in reply.jobs if _mine(j, chat)]}
