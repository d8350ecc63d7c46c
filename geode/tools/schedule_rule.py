"""Where ``schedule_job`` may run and what its approval shows, decided before any approval (issue 29 item 5).

- IPC / REPL (a person is there): create and cancel are asked every time (never "always"); list is not.
- DAEMON: only a bound chat's turn whose binding sets ``allow_schedule = true`` (asked of its approvers); a
  chat without it, or a DAEMON turn without a chat of its own, is refused. A chat lists and cancels only the
  model's jobs that deliver to that chat (:meth:`ScheduleRule.chat_of`); operator jobs are listed, no prompt.
- HEADLESS (MCP: nobody to approve), AUTOMATION (a job never creates jobs), sub-agents, any other mode:
  refused. The mode table keeps the tool out of these plans too (``geode.sessions.modes``).
- create: the job is checked here, before anyone is asked (``parse_job`` + ``check_new`` with DAEMON's real
  denylist over the catalogue, and the bound chats): bad input is a one-line error, nobody is asked, nothing
  is stored. The approval shows the schedule with its next instants in the job's zone, the prompt, the
  tools, the workspace and the delivery chat, each value JSON-quoted (control characters escaped).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Any, Literal

from geode.config_schema import GeodeConfig
from geode.messengers.config import MessengerBinding
from geode.protocol.errors import GeodeError
from geode.schedule.instants import iter_instants
from geode.schedule.jobs import JobError, JobSpec, check_new, parse_job
from geode.sessions.automation import model_denied
from geode.sessions.modes import SessionMode
from geode.tools.checks import Request
from geode.tools.send_rule import CHAT_ORIGIN, TurnSource, turn_chat
from geode.tools.spec import ToolContext, ToolSpec
from geode.visible_text import visible_json

TOOL = "schedule_job"
HANDLER = "builtin:schedule_job"
SHOWN_INSTANTS = 3  # the approval shows this many next instants
NOTHING = "Nothing was scheduled."


@dataclass(frozen=True)
class ScheduleVerdict:
    action: Literal["allow", "ask", "deny"]
    message: str = ""  # ask: the approval text; deny: the one-line error
    reason: str = ""  # deny: not_here | turn_unknown | invalid_job
    error_type: str = "schedule_job_denied"


def _q(value: Any) -> str:
    """A value as the approval shows it: JSON (C0 escaped), DEL, C1 and bidi controls escaped too."""
    return visible_json(json.dumps(value, ensure_ascii=False))


def model_job(args: Mapping[str, Any], workspace: str | Path) -> JobSpec:
    """The job a ``create`` call describes: origin ``model``, run in the creating session's ``workspace``;
    a one-line :class:`JobError` when it is not a valid job."""
    data: dict[str, Any] = {
        "name": args.get("name"),
        "prompt": args.get("prompt"),
        "tz": args.get("tz") or "UTC",
        "origin": "model",
        "workspace": str(workspace),
    }
    for key in ("cron", "every", "at", "deliver"):
        if args.get(key) not in (None, ""):
            data[key] = args[key]
    if isinstance(data.get("every"), str) and data["every"].strip().isdigit():  # seconds, written as text
        data["every"] = int(data["every"])
    if args.get("tools") is not None:
        data["allowed_tools"] = list(args["tools"])
    return parse_job(data)


def _local(instant: datetime, spec: JobSpec) -> str:
    local = instant.astimezone(spec.zone)
    return f"{local.isoformat()} ({local.tzname()})"


def approval_text(spec: JobSpec, now: datetime) -> str:
    """What a person approves for a create: every field that decides what runs, when and where it posts."""
    anchor = now.astimezone(UTC).replace(microsecond=0)
    upcoming = [_local(t, spec) for t in islice(iter_instants(spec.stored(anchor), anchor), SHOWN_INSTANTS)]
    when = {
        "cron": f"cron {_q(spec.cron)}",
        "every": f"every {spec.every} s, counted from its creation",
        "at": f"at {_q(spec.at.isoformat() if spec.at else '')}",
    }[spec.kind]
    tools = "DAEMON's list (what a chat may use)" if spec.allowed_tools is None else _q(spec.allowed_tools)
    deliver = _q(spec.deliver.destination) if spec.deliver else "none (outcomes in `geode schedule runs`)"
    return "\n".join(
        (
            f"schedule_job create {_q(spec.name)} (runs unattended: AUTOMATION mode, nobody asked)",
            f"schedule: {when} in time zone {_q(spec.tz)}",
            f"next {SHOWN_INSTANTS}: {', '.join(upcoming) or 'none'}",
            f"prompt: {_q(spec.prompt)}",
            f"tools: {tools}",
            f"workspace: {_q(spec.workspace)}",
            f"delivery: {deliver}",
        )
    )


class ScheduleRule:
    """The place rule, the create check and the approval text. Thread-safe (it only reads its fields, which
    ``use_*`` replace whole on `geode reload`)."""

    def __init__(
        self,
        bindings: Sequence[MessengerBinding],
        turns: TurnSource | None,
        *,
        tools: Iterable[ToolSpec] = (),
        config: GeodeConfig | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._turns = turns
        self._config = config or GeodeConfig()
        self._clock = clock or (lambda: datetime.now(UTC))
        self.use_bindings(bindings)
        self.use_tools(tools)

    def use_bindings(self, bindings: Sequence[MessengerBinding]) -> None:
        self._bindings = {f"{b.platform}:{b.channel_id}": b for b in bindings}

    def use_tools(self, tools: Iterable[ToolSpec]) -> None:
        """The catalogue: DAEMON's denylist is computed over it, and a job may only name its tools."""
        self._tools = tuple(tools)

    def daemon_denied(self) -> frozenset[str]:
        """What a model-created job may never name: DAEMON's real denylist over the catalogue (as AUTOMATION
        keeps it: computer use always), the list the scheduler checks the job against again."""
        return model_denied(self._config, self._tools)

    def check(self, ctx: ToolContext, args: Mapping[str, Any], workspace: Path) -> ScheduleVerdict:
        try:
            chat, binding = self._where(ctx)
        except _NotHere as exc:
            return ScheduleVerdict("deny", f"{exc} {NOTHING}", exc.reason)
        action = args.get("action")
        if action == "cancel":
            return ScheduleVerdict("ask", f"schedule_job cancel {_q(args.get('name'))}: the job is removed")
        if action != "create":
            return ScheduleVerdict("allow")
        try:
            spec = model_job(args, workspace)
            self._check_new(spec, chat, binding)
        except JobError as exc:
            return ScheduleVerdict("deny", f"{exc.message}. {NOTHING}", "invalid_job", "invalid_tool_input")
        return ScheduleVerdict("ask", approval_text(spec, self._clock()))

    def chat_of(self, ctx: ToolContext) -> str | None:
        """The chat a DAEMON turn's ``cancel``/``list`` is confined to (its own: a chat sees and cancels only
        the model's jobs that deliver to it); None where a person at the terminal decides (IPC/REPL).
        :class:`GeodeError` in one line where the chat cannot be told (then nothing is done)."""
        if ctx.mode != SessionMode.DAEMON.value:
            return None
        try:
            chat, _ = self._where(ctx)
        except _NotHere as exc:
            raise GeodeError(str(exc)) from None
        if not chat:
            raise GeodeError("Could not tell which chat this turn is from.")
        return chat

    def _where(self, ctx: ToolContext) -> tuple[str, MessengerBinding | None]:
        """The turn's chat and binding ("", None outside a chat); :class:`_NotHere` where it is denied."""
        if ctx.subagent_depth > 0:
            raise _NotHere("schedule_job is unavailable to sub-agents.", "not_here")
        if ctx.mode in (SessionMode.IPC.value, SessionMode.REPL.value):
            return "", None
        if ctx.mode == SessionMode.DAEMON.value and ctx.origin == CHAT_ORIGIN:
            try:
                chat = turn_chat(self._turns, ctx.turn_id)
            except GeodeError as exc:
                why = f"Could not tell which chat this turn is from ({exc.message})."
                raise _NotHere(why, "turn_unknown") from None
            binding = self._bindings.get(chat) or self._bindings.get(chat.rsplit(":", 1)[0])
            if binding is not None and binding.allow_schedule:
                return chat, binding
            raise _NotHere(
                f"schedule_job is not allowed in this chat ({chat or 'unknown'}): its "
                "[[messengers.bindings]] entry does not set allow_schedule = true.",
                "not_here",
            )
        why = {
            SessionMode.AUTOMATION.value: "a scheduled job never creates or cancels jobs",
            SessionMode.HEADLESS.value: "an MCP session has nobody to approve a job",
        }.get(ctx.mode, "nobody is there to approve a job")
        raise _NotHere(f"schedule_job is denied in {ctx.mode} sessions: {why}.", "not_here")

    def _check_new(self, spec: JobSpec, chat: str, binding: MessengerBinding | None) -> None:
        label = f"schedule job {spec.name!r}"
        known = {t.name for t in self._tools}
        unknown = sorted(set(spec.allowed_tools or ()) - known) if known else []
        if unknown:
            raise JobError(f"{label}: no such tool: {', '.join(unknown)}")
        dest = spec.deliver.destination if spec.deliver else ""
        if binding is not None and dest and dest not in (chat, *binding.send_to):
            listed = ", ".join(binding.send_to) or "none"
            raise JobError(
                f"{label}: this chat's job may deliver only to its own chat ({chat}) or its send_to "
                f"({listed})"
            )
        check_new(spec, self._clock(), bound_chats=set(self._bindings), model_denied=self.daemon_denied())


class _NotHere(Exception):
    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def check_schedule(rule: ScheduleRule | None, req: Request, workspace: Path) -> None:
    """The executor's step for schedule_job (before the approval): a refusal is a tool error recorded on the
    timeline (``schedule_job_denied``); create and cancel force the prompt and show its text."""
    if req.spec is None or req.spec.handler != HANDLER:
        return
    verdict = (rule or ScheduleRule((), None)).check(req.ctx, req.call.input, workspace)
    if verdict.action == "deny":
        raise req.deny("policy", verdict.message, verdict.error_type, reason=verdict.reason)
    if verdict.action == "ask":
        req.force_ask, req.approval_detail = True, verdict.message
