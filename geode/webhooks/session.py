"""The AUTOMATION session of one webhook delivery's turn: the route's workspace (created 0700), its session
(``session = "new"``: one per delivery; ``"named"``: one that accumulates), budget, model and tool lists,
and the ``lanes.submit`` settings the webhooks child submits with (:func:`route_turn_settings`).

Session ids are derived from the route (and the delivery) under the home's session-id key, as a scheduled
job's are (:func:`geode.sessions.automation.job_session_id`): a resubmission after a crash is the same
session, and nobody outside the home can compute it. Tools follow the operator's rule of
:func:`geode.sessions.automation.tool_lists`: a route is always the operator's (it lives in config.toml), so
denylisted tools it names explicitly are lifted and granted; ``allowed_tools = []`` is AUTOMATION's list.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from geode.config_schema import GeodeConfig
from geode.home import GeodeHome
from geode.home_secrets import session_id_key
from geode.memory.scopes import hook_scope
from geode.messengers.session_spec import PlanSource
from geode.protocol.errors import ConfigError
from geode.sessions.automation import WORKSPACES, SessionFactory, with_tool_lists
from geode.sessions.factory import SessionSpec, create_session
from geode.sessions.modes import WEBHOOKS_ORIGIN, SessionMode
from geode.webhooks.settings import RouteSpec

_UNSAFE = re.compile(r"[^A-Za-z0-9_.:\-]")
_SESSION_HEX = 16


def route_workspace(route: RouteSpec, home: GeodeHome) -> Path:
    """The route's workspace, created on first use (0700): the one the operator set, else
    ``$GEODE_HOME/workspaces/hook-<name>``. A folder that cannot be made is a one-line ``ConfigError``."""
    ws = route.workspace_dir(home.root / WORKSPACES)
    try:
        ws.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not route.workspace:  # ours: always private; an operator's folder keeps its own mode
            os.chmod(ws, 0o700)
    except OSError as exc:
        raise ConfigError(
            f"webhook route {route.name!r}: workspace {exc.filename or ws}: {exc.strerror or exc}"
        ) from None
    return ws


def route_session_id(route: RouteSpec, delivery_id: str, key: bytes) -> str:
    """The delivery's session: ``s-hook-<route>-<delivery>-<h>`` for a new session per delivery, or the
    route's named session ``s-hook-<route>-n-<session_name>-<h>`` (the same for every delivery); ``h`` is
    keyed with ``key`` (the home's session-id key) over the full, unshortened names."""
    if route.session == "named":
        parts = ("session", "hook", route.name, "named", route.session_name)
        readable = f"n-{_UNSAFE.sub('_', route.session_name)[:40]}"
    else:
        parts = ("session", "hook", route.name, "delivery", delivery_id)
        readable = _UNSAFE.sub("_", delivery_id)[:40] or "_"
    h = hmac.new(key, "\x00".join(parts).encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()
    return f"s-hook-{_UNSAFE.sub('_', route.name)[:40]}-{readable}-{h[:_SESSION_HEX]}"


def route_session(
    route: RouteSpec,
    *,
    delivery_id: str,
    config: GeodeConfig,
    home: GeodeHome,
    plans: PlanSource | None = None,
    origin: str = WEBHOOKS_ORIGIN,
    env: Mapping[str, str] | None = None,
    factory: SessionFactory = create_session,
) -> SessionSpec:
    """The AUTOMATION :class:`SessionSpec` of one delivery on ``route``. ``config``: the child's typed
    snapshot; ``home``: the daemon's (session-id key, default workspace); ``plans``: the executor's plan
    source (None: the loop worker applies the lists to its own catalogue); ``origin``: the peer lanes
    streams the turn's events to (the webhooks child); ``env``: where ``GEODE_MODEL`` is read (the route's
    ``model`` wins over it)."""
    plan = plans.base() if plans is not None else None
    spec = factory(
        SessionMode.AUTOMATION,
        home=home,
        session_id=route_session_id(route, delivery_id, session_id_key(home)),
        workspace=route_workspace(route, home),
        time_budget_override=route.budget_s,
        model_override=route.model or None,
        origin=origin,
        plan=plan,
        env=env,
        config=config,
        scope=hook_scope(route.name),
    )
    if spec.mode is not SessionMode.AUTOMATION:
        raise ValueError(f"a webhook delivery's session must be AUTOMATION, the factory made {spec.mode}")
    allowed = route.allowed_tools or None  # []: AUTOMATION's list
    return with_tool_lists(spec, allowed, operator=True, plan=plan, plans=plans)


def route_turn_settings(
    route: RouteSpec,
    *,
    delivery_id: str,
    config: GeodeConfig,
    home: GeodeHome,
    plans: PlanSource | None = None,
    origin: str = WEBHOOKS_ORIGIN,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``lanes.submit(settings=...)`` dict of one delivery's turn (mode AUTOMATION; the session id is
    ``settings["session_id"]``), as a scheduled job's :func:`~geode.sessions.automation.job_turn_settings`."""
    spec = route_session(
        route, delivery_id=delivery_id, config=config, home=home, plans=plans, origin=origin, env=env
    )
    return spec.turn_settings()
