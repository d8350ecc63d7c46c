"""`geode status [--json]` as the `geode` console script runs it: with nothing running, the instance lock
alone says so (no typer); with a `geode serve` tree of ipc children (the default), its reads go over
:mod:`actors.cli.light_bus` — the supervisor first, then lanes, the executor, messengers and the scheduler at
once — with each reply validated by pydantic-core from the models' stored schemas
(``actors/cli/status_wire_data.py``), and no typer, pydantic model, bus or config schema imported.

Anything else goes the full way (``actors.cli.serve_cmds.status``): a tree inside another process (`geode
mcp`), ``[bus]`` settings (tcp endpoints, CURVE) or a worker host, scheduled jobs to summarize (the ledger),
a webhooks child. Both ways print the same lines and the same JSON (tests/cli/test_status_light_tree.py).
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from geode.home_paths import HomePaths
from geode.protocol.errors import GeodeError

if TYPE_CHECKING:  # imported once the light way applies (nothing running: no zmq, no pydantic-core; the
    # home as strings, no pathlib, until a tree holds it)
    from actors.cli.wire import Frame
    from actors.tree.instance_lock import InstanceLock
    from geode.home import GeodeHome

WAIT_S = {"supervisor": 3.0, "lanes": 2.0, "messengers": 2.0, "executor": 1.0, "scheduler": 2.0}


def _echo(line: str, *, err: bool = False) -> None:
    print(line, file=sys.stderr if err else sys.stdout, flush=True)


def _light(home: GeodeHome, lock: InstanceLock) -> bool:
    """A `geode serve` tree whose children this process reaches on ipc without the bus's settings."""
    from actors.tree.instance_lock import SERVE
    from geode.config_bytes import mentions

    if os.environ.get("GEODE_ROLE") == "worker":  # actors.tree.worker_role.ROLE_ENV: main's tcp ports
        return False
    if lock.holder() != SERVE:
        return False
    return not mentions(home, b"bus")  # [bus], [bus.tcp], [bus.curve]: the bus resolves endpoints


def status(as_json: bool = False) -> None:
    """`geode status`: the light reads when they apply, else ``serve_cmds.status``."""
    from actors.tree.instance_lock import InstanceLock

    paths = HomePaths.from_env()
    lock = InstanceLock(paths.lock_file)
    if not lock.is_held():  # nothing holds the home: said from the lock alone (as serve_cmds says it)
        _echo(
            json.dumps({"running": False, "children": []})
            if as_json
            else f"geode is not running (GEODE_HOME={paths.root})"
        )
        raise SystemExit(1)
    from geode.home import full_home

    home = full_home(paths)
    if not _light(home, lock):
        from actors.cli.serve_cmds import status as full_status

        full_status(as_json=as_json)
        return
    from actors.cli import status_wire_data as sd
    from actors.cli.light_bus import ask_children
    from actors.cli.wire import unwrap, validator

    st = ask_children(home, {"supervisor": (sd.TREE_STATUS, {}, WAIT_S["supervisor"])})["supervisor"]
    try:
        tree = validator("TREE_STATUS_SCHEMA", sd).validate_python(unwrap(st)) if st is not None else None
    except GeodeError as exc:
        tree, why = None, str(exc)
    except ValueError as exc:  # pydantic-core's ValidationError
        tree, why = None, f"invalid {sd.TREE_STATUS} reply: {str(exc).splitlines()[0]}"
    else:
        why = f"no reply to {sd.TREE_STATUS} within {WAIT_S['supervisor']:g}s"
    if tree is None:
        _echo(f"geode: the supervisor does not answer: {why}", err=True)
        raise SystemExit(1)
    _show(home, tree, as_json)


def _body(frame: Frame | None) -> dict[str, Any] | None:
    """An ok reply's body; None for an error reply or none at all (the child "not answering")."""
    from actors.cli.wire import unwrap

    try:
        return unwrap(frame) if frame is not None else None
    except GeodeError:
        return None


def _show(home: GeodeHome, tree: dict[str, Any], as_json: bool) -> None:
    from actors.cli import status_wire_data as sd
    from actors.cli.hosts_view import TOOL_HOSTS, hosts_detail, hosts_lines
    from actors.cli.lanes_view import lanes_lines
    from actors.cli.light_bus import ask_children
    from actors.cli.messengers_lines import poller_lines

    names = {c["name"] for c in tree["children"]}  # a worker host (--role worker) has no lanes, no messengers
    asks: dict[str, tuple[str, dict[str, object], float]] = {}
    if "lanes" in names:
        asks["lanes"] = (sd.LANES_STATUS, {}, WAIT_S["lanes"])
        asks["executor"] = (TOOL_HOSTS, {}, WAIT_S["executor"])
        if "scheduler" in names:
            asks["scheduler"] = (sd.SCHEDULE_LIST, {}, WAIT_S["scheduler"])
    if "messengers" in names:
        asks["messengers"] = (sd.MESSENGER_BINDINGS, {}, WAIT_S["messengers"])
    got = {k: _body(v) for k, v in ask_children(home, asks).items()} if asks else {}
    lanes = got.get("lanes")
    talk = _bindings(got.get("messengers")) if "messengers" in names else None
    hosts = hosts_detail(lanes, _executor_hosts(got.get("executor"))) if "lanes" in names else []
    jobs = _jobs(home, "scheduler" in names, got.get("scheduler")) if "lanes" in names else []
    hooks = _webhooks(home) if "webhooks" in names else None
    if as_json:
        out = {"running": True, **tree, "lanes": lanes, "hosts": hosts}
        out["messengers"] = talk.get("platforms", []) if talk is not None else None
        if jobs:
            out["schedule"] = jobs
        if "webhooks" in names:
            out["webhooks"] = hooks
        _echo(json.dumps(out))
        return
    from actors.cli.tree_table import tree_lines

    mode = " single-process" if tree["single_process"] else ""
    lines = [f"supervisor pid {tree['pid']} incarnation {tree['incarnation']} {tree['state']}{mode}"]
    lines += tree_lines(tree)
    if "lanes" in names:
        lines += [*lanes_lines(lanes), *hosts_lines(hosts), *poller_lines(talk)]
    if jobs:
        from actors.cli.schedule_view import status_lines

        lines += status_lines(jobs)
    if "webhooks" in names:
        from actors.cli.webhooks_view import status_lines as webhook_lines

        lines += webhook_lines(hooks)
    _echo("\n".join(lines))


def _bindings(body: dict[str, Any] | None) -> dict[str, Any] | None:
    """``messenger.bindings`` as ``messengers_view.messengers_detail`` gives it (validated, JSON data)."""
    from actors.cli import status_wire_data as sd
    from actors.cli.wire import validator

    if body is None:
        return None
    try:
        out: dict[str, Any] = validator("BINDINGS_REPLY_SCHEMA", sd).validate_python(body)
    except ValueError:
        return None
    return out


def _executor_hosts(body: dict[str, Any] | None) -> list[dict[str, Any]]:
    """As ``hosts_view.executor_hosts``: the remote executors main's executor reports, else []."""
    hosts = body.get("hosts") if isinstance(body, dict) else None
    return [h for h in hosts if isinstance(h, dict)] if isinstance(hosts, list) else []


def _jobs(home: GeodeHome, ask_scheduler: bool, body: dict[str, Any] | None) -> list[dict[str, Any]]:
    """No job (the scheduler says so): nothing to show. Jobs, or no answer: the full summaries (the
    ledger's last runs, the scheduler asked again; ``schedule_view.status_summaries``)."""
    if ask_scheduler and body is not None and body.get("jobs") == []:
        return []
    from actors.cli.schedule_view import status_summaries

    return status_summaries(home, ask_scheduler)


def _webhooks(home: GeodeHome) -> dict[str, Any] | None:
    from actors.cli.webhooks_view import status_detail

    return status_detail(home)
