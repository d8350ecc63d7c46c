"""An AUTOMATION session for one occurrence of a scheduled job (:func:`job_session`, and the ``turn.run``
settings it submits with, :func:`job_turn_settings`): the mode's 300 s default budget (the job's
``budget_s``), its model, DAEMON's tool list (computer use never), the job's workspace and session.

Tools: a job's ``allowed_tools`` is its allowlist (None: every tool AUTOMATION allows). A job the operator
defined (``origin = "operator"``: config or CLI) may name denylisted tools explicitly, e.g. ``run_bash``: they
leave the denylist, and every tool it names runs without an approval (``granted_tools``: policy, not a
prompt). A job the model created never goes beyond DAEMON's list (:func:`model_denied`, which
:func:`geode.schedule.jobs.check_new` refuses at creation) and grants nothing. Any other call that would need
approval is denied, since nobody is there to ask (:func:`geode.tools.approvals.no_one_in_automation`).

Sessions: ``session = "new"`` is a session per occurrence, ``"named"`` one that accumulates; both ids are
derived from the job (and the occurrence) under the home's session-id key, so a resubmission after a crash
is the same session, and nobody outside the home can compute it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from geode.config_schema import GeodeConfig
from geode.home import GeodeHome
from geode.home_secrets import session_id_key
from geode.memory.scopes import job_scope
from geode.messengers.session_spec import PlanSource
from geode.schedule.jobs import JobError, JobSpec
from geode.schedule.occurrences import parse_occurrence_id, utc_text
from geode.sessions.factory import SessionSpec, create_session
from geode.sessions.modes import AUTOMATION_ORIGIN, NEVER_GRANTED, SessionMode, default_denylist
from geode.tools.plan import BoundToolPlan, compile_plan
from geode.tools.spec import ToolSpec

WORKSPACES = "workspaces"  # $GEODE_HOME/workspaces/job-<name>: a job's default workspace
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:\-]")
_SESSION_HEX = 16

SessionFactory = Callable[..., SessionSpec]


def model_denied(config: GeodeConfig | None, tools: Iterable[ToolSpec] = ()) -> frozenset[str]:
    """What a model-created job may never name: AUTOMATION's denylist (DAEMON's list, computer use always)
    over ``tools`` (the catalogue's specs; the name-based residue holds without them). The ``model_denied``
    argument of :func:`geode.schedule.jobs.check_new`."""
    return default_denylist(SessionMode.AUTOMATION, config=config, plan_tools=tuple(tools))


def job_workspace(job: JobSpec, home: GeodeHome) -> Path:
    """The job's workspace, created on first use: the one the operator set (or, for a model-created job,
    the creating session's), else ``$GEODE_HOME/workspaces/job-<name>`` (0700)."""
    if job.workspace:
        ws = Path(job.workspace).expanduser()
        if not ws.is_absolute():
            raise JobError(f"schedule job {job.name!r}: workspace {job.workspace!r} is not an absolute path")
        ws.mkdir(mode=0o700, parents=True, exist_ok=True)
        return ws
    ws = job.workspace_dir(home.root / WORKSPACES)
    ws.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(ws, 0o700)
    return ws


def job_session_id(job: JobSpec, occurrence: str, key: bytes) -> str:
    """The occurrence's session: ``s-job-<job>-<instant>-<h>`` for a new session per run, or the job's named
    session ``s-job-<job>-n-<session_name>-<h>`` (the same for every run); ``h`` is keyed with ``key``."""
    parsed = parse_occurrence_id(occurrence)
    if parsed.job != job.name:
        raise ValueError(f"occurrence {occurrence!r} is not one of job {job.name!r}")
    if job.session == "named":
        name = job.session_name or ""
        parts, readable = ("session", "job", job.name, "named", name), f"n-{_UNSAFE.sub('_', name)[:40]}"
    else:
        if parsed.instant is not None:
            readable = utc_text(parsed.instant).replace("-", "").replace(":", "")
        else:
            readable = f"now-{_UNSAFE.sub('_', parsed.request_id or '')[:32]}"
        parts = ("session", "job", job.name, "occurrence", occurrence)
    h = hmac.new(key, "\x00".join(parts).encode(), hashlib.sha256).hexdigest()[:_SESSION_HEX]
    return f"s-job-{_UNSAFE.sub('_', job.name)[:40]}-{readable}-{h}"


def tool_lists(
    allowed_tools: Iterable[str] | None,
    *,
    operator: bool,
    denied: frozenset[str],
    tools: tuple[ToolSpec, ...],
) -> tuple[frozenset[str], frozenset[str] | None, frozenset[str]]:
    """(denied, allowed, granted) for an AUTOMATION turn naming ``allowed_tools`` (None: the mode's list):
    an operator's explicit names (a job or a webhook route in config) leave the denylist (never computer use
    or schedule_job, never a tool its own policy denies) and are granted; a model's only narrow."""
    if allowed_tools is None:
        return denied, None, frozenset()
    named = frozenset(allowed_tools)
    if not operator:
        return denied, named - denied, frozenset()
    declared = {t.name for t in tools if t.policy.denied}
    lifted = (named & denied) - NEVER_GRANTED - declared
    denied = denied - lifted
    return denied, named - denied, named - denied


def job_session(
    job: JobSpec,
    *,
    occurrence: str,
    config: GeodeConfig,
    home: GeodeHome,
    plans: PlanSource | None = None,
    origin: str = AUTOMATION_ORIGIN,
    env: Mapping[str, str] | None = None,
    factory: SessionFactory = create_session,
) -> SessionSpec:
    """The AUTOMATION :class:`SessionSpec` of ``job``'s ``occurrence`` (an occurrence id text).

    - ``job``: the stored job (:class:`geode.schedule.jobs.Job` or its spec); ``config``: the child's typed
      snapshot (``ctx.settings``); ``home``: the daemon's home (session-id key, default workspace).
    - ``plans``: the plan source (a ``CataloguePlans`` asking the executor, as messengers uses); None
      composes without a plan (the loop worker applies the lists to its own catalogue).
    - ``origin``: the peer lanes streams the turn's events to (the scheduler child).
    - ``env``: where ``GEODE_MODEL`` is read (None: ``os.environ``); the job's ``model`` wins over it.
    The workspace is created here (first run); a workspace that cannot be made is a one-line ``JobError``."""
    plan = plans.base() if plans is not None else None  # the built-ins when the executor is down
    try:
        ws = job_workspace(job, home)
    except OSError as exc:
        raise JobError(f"schedule job {job.name!r}: workspace {exc.filename}: {exc.strerror}") from None
    spec = factory(
        SessionMode.AUTOMATION,
        home=home,
        session_id=job_session_id(job, occurrence, session_id_key(home)),
        workspace=ws,
        time_budget_override=job.budget_s,
        model_override=job.model,
        origin=origin,
        plan=plan,
        env=env,
        config=config,
        scope=job_scope(job.name),
    )
    if spec.mode is not SessionMode.AUTOMATION:
        raise ValueError(f"a scheduled job's session must be AUTOMATION, the factory made {spec.mode}")
    operator = job.origin == "operator"
    return with_tool_lists(spec, job.allowed_tools, operator=operator, plan=plan, plans=plans)


def with_tool_lists(
    spec: SessionSpec,
    allowed_tools: Iterable[str] | None,
    *,
    operator: bool,
    plan: Any,
    plans: PlanSource | None,
) -> SessionSpec:
    """``spec`` (an AUTOMATION session the factory made over ``plan``, from ``plans``) with the
    :func:`tool_lists` of ``allowed_tools`` applied, its plan narrowed to them (the loop worker's rule)."""
    tools = tuple(t for t in getattr(plan, "specs", ()) if isinstance(t, ToolSpec))
    denied, allowed, granted = tool_lists(
        allowed_tools, operator=operator, denied=spec.denied_tools, tools=tools
    )
    update: dict[str, Any] = {"denied_tools": denied, "allowed_tools": allowed, "granted_tools": granted}
    if isinstance(plan, BoundToolPlan):  # the session's plan with the job's lists (the loop worker's rule)
        own = compile_plan(plan.specs, allowed=allowed, denied=denied)
        visible = tuple(t.name for t in tools if t.name in own.tool_names)
        gen = plan.generation if own.content_hash == plan.content_hash else plan.generation + 1
        projected = plan.filtered(allowed=frozenset(visible)).projected(spec.provider)
        update.update(plan=projected, visible_tools=visible)
        # composed without the executor's answer: claim no plan hash (as control and messengers do)
        update["plan_hash"] = own.content_hash if plans is not None and plans.from_executor else ""
        update["plan_generation"] = gen if update["plan_hash"] else 0
    return spec.model_copy(update=update)


def job_turn_settings(
    job: JobSpec,
    *,
    occurrence: str,
    config: GeodeConfig,
    home: GeodeHome,
    plans: PlanSource | None = None,
    origin: str = AUTOMATION_ORIGIN,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``lanes.submit(settings=...)`` dict of one occurrence's turn (mode AUTOMATION; the session id is
    ``settings["session_id"]``): :func:`job_session`'s spec as control and messengers submit theirs."""
    spec = job_session(
        job, occurrence=occurrence, config=config, home=home, plans=plans, origin=origin, env=env
    )
    return spec.turn_settings()
