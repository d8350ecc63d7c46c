"""What `geode webhooks` and `geode doctor` show of the webhook routes: the webhooks child's routes and
counters when it answers (``webhooks.routes``), else the routes of config.toml beside the intake counts the
records hold, read directly (read-only, as `geode schedule list` reads the ledger), so the command answers
with no daemon; and the doctor's checks of the ``[webhooks]`` section (a secret missing from .env, a
non-loopback listener with no trusted proxies)."""

from __future__ import annotations

import ipaddress
from typing import Any

from geode.home import GeodeHome
from geode.protocol.errors import GeodeError

OPEN_STATES = ("recorded", "submitted")  # an intake whose turn has not ended: it holds a place in the queue


def ask_routes(home: GeodeHome, timeout_s: float = 3.0) -> dict[str, Any] | None:
    """The webhooks child's ``webhooks.routes`` as JSON-able data, or None when it does not answer."""
    from actors.cli.child_view import ask_child
    from geode.protocol import webhooks as wh

    return ask_child(home, "webhooks", wh.ROUTES, wh.ListRoutes(), wh.RoutesReply, timeout_s)


def gather(home: GeodeHome) -> dict[str, Any]:
    """``{"source": "child", "listen", "routes": [...]}`` from the running child, else ``{"source": "store",
    "listen", "routes", "note"}``: each configured route with ``stored`` (its intakes by state) and
    ``queued``; a route the records hold but config.toml no longer names is listed too (``configured``
    false)."""
    from actors.tree.client import is_running

    up = is_running(home)
    if up:
        detail = ask_routes(home)
        if detail is not None:
            return {"source": "child", **detail}
    section = _section(home)
    counts = stored_counts(home)
    routes: list[dict[str, Any]] = []
    for r in section.routes:
        routes.append({**_route_fields(r), "configured": True, **_stored(counts.pop(r.name, {}))})
    for name, states in sorted(counts.items()):
        routes.append(
            {"name": name, "path": "", "auth": "", "deliver": "", "configured": False, **_stored(states)}
        )
    if not up:
        note = f"the daemon is not running (GEODE_HOME={home.root})"
    elif not section.listen:
        note = "the webhooks child is off ([webhooks] listen is not set)"
    else:
        note = "the webhooks child does not answer"
    return {"source": "store", "listen": section.listen, "routes": routes, "note": note}


def _section(home: GeodeHome) -> Any:
    """The ``[webhooks]`` section of the home's config.toml (as `geode serve` would read it)."""
    from geode.config_schema import GeodeConfig
    from geode.config_source import ConfigSource

    return ConfigSource(home, GeodeConfig.from_raw, tree=True).snapshot.webhooks


def listen_of(home: GeodeHome) -> str:
    """``[webhooks] listen`` of the home's config ("" when off or unreadable)."""
    try:
        return str(_section(home).listen)
    except (GeodeError, OSError):
        return ""


def _route_fields(r: Any) -> dict[str, Any]:
    deliver = r.deliver.destination if r.deliver is not None else ""
    return {"name": r.name, "path": r.path, "auth": r.auth, "deliver": deliver}


def _stored(states: dict[str, int]) -> dict[str, Any]:
    return {"stored": dict(sorted(states.items())), "queued": sum(states.get(s, 0) for s in OPEN_STATES)}


def stored_counts(home: GeodeHome) -> dict[str, dict[str, int]]:
    """``{route: {state: n}}`` of the intake table, read-only; {} when nothing was ever recorded here."""
    from geode.protocol.errors import NotFound
    from geode.records.intake_table import IntakeTable
    from geode.records.reader import RecordReader
    from geode.records.writer import GroupWriter

    reader = RecordReader.for_home(home)
    try:
        reader.open()
    except NotFound:
        return {}
    try:
        counts = IntakeTable(reader.renv, GroupWriter(reader.renv)).counts()
    except KeyError:  # a store written before the intake table existed: no intakes
        return {}
    finally:
        reader.close()
    return {route: dict(states) for route, states in counts.routes.items()}


# geode status ----------------------------------------------------------------------------------------------
def status_detail(home: GeodeHome, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """The webhooks child's ``runtime.status`` detail (listen, routes, counters, open, last error), or None
    when it does not answer."""
    from actors.cli.child_view import ask_child
    from geode.protocol import runtime

    got = ask_child(home, "webhooks", runtime.STATUS, runtime.StatusQuery(), runtime.StatusReply, timeout_s)
    return dict(got["detail"]) if got is not None else None


def status_lines(detail: dict[str, Any] | None) -> list[str]:
    """`geode status`'s line for the webhooks child: where it listens and its counters summed over routes
    (`geode webhooks` has them per route), and its last error when it has one."""
    if detail is None:
        return ["webhooks: not answering"]
    counters = list((detail.get("counters") or {}).values())

    def total(key: str) -> int:
        return sum(int(c.get(key) or 0) for c in counters)

    rejected = sum(sum((c.get("rejected") or {}).values()) for c in counters)
    routes = detail.get("routes") or []
    out = [
        f"webhooks: listening on {detail.get('listen') or '-'} · {len(routes)} route(s) · "
        f"accepted {total('accepted')} · replayed {total('replayed')} · rejected {rejected} · "
        f"rate-limited {total('rate_limited')} · queued {total('queued')} (`geode webhooks`)"
    ]
    if detail.get("last_error"):
        out.append(f"  last error: {' '.join(str(detail['last_error']).split())[:300]}")
    return out


# text ------------------------------------------------------------------------------------------------------
def route_lines(detail: dict[str, Any]) -> list[str]:
    """Two lines per route: what it is, then its counters (the child's) or its stored intakes."""
    listen = detail.get("listen") or ""
    if detail.get("source") == "child":
        out = [f"webhooks: listening on {listen}"]
    else:
        where = f" (listen {listen})" if listen else ""
        out = [f"webhooks: {detail.get('note')}: routes from config.toml{where}, intakes from the records"]
    routes = detail.get("routes") or []
    if not routes:
        out.append("no webhook routes ([[webhooks.routes]] in config.toml)")
    for r in routes:
        head = f"{r.get('name')}  {r.get('path') or '-'}  auth {r.get('auth') or '-'}"
        if r.get("deliver"):
            head += f" -> {r['deliver']}"
        if r.get("configured") is False:
            head += "  (not in config.toml: intakes only)"
        out.append(head)
        out.append("  " + (_counter_line(r["counters"]) if "counters" in r else _stored_line(r)))
    return out


def _counter_line(c: dict[str, Any]) -> str:
    rejected = c.get("rejected") or {}
    why = ", ".join(f"{k} {v}" for k, v in sorted(rejected.items()))
    return (
        f"accepted {c.get('accepted', 0)} · replayed {c.get('replayed', 0)} · "
        f"rejected {sum(rejected.values())}{f' ({why})' if why else ''} · "
        f"rate-limited {c.get('rate_limited', 0)} · queued {c.get('queued', 0)} · "
        f"done {c.get('done', 0)}"
    )


def _stored_line(r: dict[str, Any]) -> str:
    stored = r.get("stored") or {}
    states = ", ".join(f"{k} {v}" for k, v in stored.items())
    listed = f" ({states})" if states else ""
    return f"stored intakes {sum(stored.values())}{listed} · queued {r.get('queued', 0)}"


# doctor ----------------------------------------------------------------------------------------------------
def doctor_checks(home: GeodeHome, raw: dict[str, Any]) -> list[dict[str, Any]]:
    """An error per route whose secret key is missing from $GEODE_HOME/.env (named, never its value); a
    warning when the listener is not on a loopback address and no ``trusted_proxies`` is set."""
    from geode.webhooks.settings import WebhooksSection

    try:
        section = WebhooksSection.model_validate(raw.get("webhooks") or {})
    except (ValueError, GeodeError):
        return []  # the config check already reported it
    out: list[dict[str, Any]] = []
    env = home.load_dotenv() if section.routes else {}
    for r in section.routes:
        missing = [k for k in r.secrets if not env.get(k)]
        if missing:
            detail = (
                f"route {r.name}: {', '.join(missing)} missing from {home.env_file} "
                "(every delivery to it is refused 401 until it is set)"
            )
            out.append({"name": "webhooks", "ok": False, "detail": detail, "warn": False})
    host = section.listen.rsplit(":", 1)[0].strip("[]") if section.listen else ""
    if host and not _loopback(host) and not section.trusted_proxies:
        detail = (
            f"[webhooks] listen = {section.listen!r} is not a loopback address and trusted_proxies is empty: "
            "put a TLS reverse proxy in front (docs/automation.md, Webhooks) and list it in trusted_proxies"
        )
        out.append({"name": "webhooks", "ok": True, "detail": detail, "warn": True})
    return out


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost: it may resolve anywhere
