"""The DAEMON-mode session of a chat binding, composed the way control composes a CLI session: the settings
dict a messenger turn is submitted with (``lanes.submit(settings=...)``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from geode.home import GeodeHome
from geode.memory.scopes import chat_scope
from geode.messengers.config import MessengerBinding
from geode.messengers.workspaces import chat_dir_name
from geode.sessions.factory import SessionSpec, create_session
from geode.sessions.modes import SessionMode

MESSENGERS_ORIGIN = "messengers"  # the peer lanes streams a messenger turn's events to


class PlanSource(Protocol):
    """Where the tool catalogue comes from (``geode.tools.catalogue_plans.CataloguePlans``)."""

    def base(self) -> Any: ...

    @property
    def from_executor(self) -> bool: ...


SessionFactory = Callable[..., SessionSpec]


def daemon_session_spec(
    binding: MessengerBinding,
    *,
    home: GeodeHome,
    session_id: str,
    workspace: str | os.PathLike[str],
    plans: PlanSource | None,
    origin: str = MESSENGERS_ORIGIN,
    model_override: str | None = None,
    env: Mapping[str, str] | None = None,
    factory: SessionFactory = create_session,
) -> SessionSpec:
    """The :class:`SessionSpec` of a bound chat's session (see :func:`daemon_session_settings`)."""
    spec = factory(
        SessionMode.DAEMON,
        home=home,
        session_id=session_id,
        workspace=workspace,
        time_budget_override=binding.time_budget_s,
        allowed_tool_names=binding.allowed_tools,
        schedule_allowed=binding.allow_schedule,
        model_override=model_override,
        origin=origin,
        plan=plans.base() if plans is not None else None,  # the built-ins when the executor is down
        env=env,
        scope=chat_scope(chat_dir_name(binding)),  # the chat's memory and search scope
    )
    if spec.mode is not SessionMode.DAEMON:
        raise ValueError(f"a messenger session must be DAEMON, the factory made {spec.mode}")
    update: dict[str, Any] = {}
    if plans is not None and not plans.from_executor:  # composed without the executor's answer:
        update.update(plan_hash="", plan_generation=0)  # claim no plan hash (as control does)
    if spec.allowed_tools is not None:  # the binding narrows; it never lifts the DAEMON denylist
        update["allowed_tools"] = spec.allowed_tools - spec.denied_tools
    return spec.model_copy(update=update) if update else spec


def daemon_session_settings(
    binding: MessengerBinding,
    *,
    home: GeodeHome,
    session_id: str,
    workspace: str | os.PathLike[str],
    plans: PlanSource | None,
    origin: str = MESSENGERS_ORIGIN,
    model_override: str | None = None,
    env: Mapping[str, str] | None = None,
    factory: SessionFactory = create_session,
) -> dict[str, Any]:
    """The settings dict of ``lanes.submit(settings=...)`` for a turn in ``binding``'s chat.

    - ``binding``: the chat's binding (``Bindings.find``/``classify``): its ``allowed_tools`` narrow the plan
      (None: every tool DAEMON allows; names the DAEMON denylist holds stay denied) and its
      ``time_budget_s`` is the turn's wall-clock budget.
    - ``home``: the daemon's ``GeodeHome`` (the model and ``[daemon]``/``[gateway]`` computer use are re-read
      from its config, as for every composed session).
    - ``session_id``: the chat's current session (``session_id_for(platform, channel_key, generation)``).
    - ``workspace``: the session's workspace directory (the chat's own, ``workspaces.chat_workspace``); file
      tools resolve paths against it (and, with ``[tools] roots`` unset, stay inside it).
    - ``plans``: the plan source (a ``CataloguePlans`` asking the executor, ``cache=False``); None composes
      without a plan (no tools known; the loop worker applies the lists to its own catalogue).
    - ``origin``: the peer lanes streams the turn's events to (``"messengers"``).
    - ``model_override``: a model id for this session (None: ``GEODE_MODEL`` > config > catalogue default).
    - ``env``: the environment to read ``GEODE_MODEL`` from (None: ``os.environ``); ``factory``: for tests.

    Mode DAEMON: no approvals forwarded to a terminal, run_bash, delegate_task, computer (unless the operator
    enabled it) and personal-data tools denied. The dict is the spec's JSON dump without the plan, as control
    submits it (``plan_hash``/``plan_generation`` travel with it)."""
    spec = daemon_session_spec(
        binding,
        home=home,
        session_id=session_id,
        workspace=workspace,
        plans=plans,
        origin=origin,
        model_override=model_override,
        env=env,
        factory=factory,
    )
    return spec.turn_settings(session_id)
