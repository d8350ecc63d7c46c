"""The ``hosts`` part of ``geode status`` on the main host: each worker host (``geode serve --role worker``),
its loop workers (lanes), its executor (the executor's ``tool.hosts``), heartbeat age, work in flight."""

from __future__ import annotations

from typing import Any

from geode.home import GeodeHome
from geode.protocol.errors import GeodeError

TOOL_HOSTS = "tool.hosts"  # answered by main's executor (contract17.md); absent: loop workers only


def executor_hosts(home: GeodeHome, timeout_s: float = 1.0) -> list[dict[str, Any]]:
    """Remote executors as main's executor reports them, or [] when it does not (yet) answer this."""
    from actors.tree.client import client_bus

    try:
        with client_bus(home) as bus:
            out = bus.transport.call("executor", TOOL_HOSTS, {}, timeout_s=timeout_s)
    except (GeodeError, ValueError, KeyError):
        return []
    hosts = out.get("hosts") if isinstance(out, dict) else None
    return [h for h in hosts if isinstance(h, dict)] if isinstance(hosts, list) else []


def hosts_detail(lanes: dict[str, Any] | None, executors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per worker host: ``host``, ``address`` (when known), ``children`` (loop workers with turns
    in flight; executors with effects in flight), each with its incarnation and last heartbeat age."""
    hosts: dict[str, dict[str, Any]] = {}

    def entry(host: str) -> dict[str, Any]:
        return hosts.setdefault(host, {"host": host, "address": None, "children": []})

    for w in (lanes or {}).get("workers", []):
        name = str(w.get("worker", ""))
        if "/" not in name:
            continue
        at = entry(name.split("/", 1)[0])
        at["address"] = at["address"] or w.get("address")
        at["children"].append(
            {
                "name": name,
                "kind": "loop",
                "incarnation": w.get("incarnation"),
                "last_heartbeat_s": w.get("last_seen_s"),
                "capacity": w.get("capacity"),
                "turns_in_flight": list(w.get("running", [])),
            }
        )
    for e in executors:
        host = str(e.get("host") or "?")
        h = entry(host)
        h["address"] = h["address"] or e.get("address")
        h["children"].append(
            {
                "name": e.get("name") or f"{host}/executor",
                "kind": "executor",
                "state": e.get("state", "up"),  # "lost": missed its heartbeats, its roots are down
                "incarnation": e.get("incarnation"),
                "last_heartbeat_s": e.get("last_seen_s"),
                "effects_in_flight": e.get("effects_in_flight", 0),
                "roots": list(e.get("roots") or []),
            }
        )
    return [hosts[k] for k in sorted(hosts)]


def hosts_lines(hosts: list[dict[str, Any]]) -> list[str]:
    if not hosts:
        return []
    out = ["hosts:"]
    for h in hosts:
        out.append(f"  {h['host']}" + (f" ({h['address']})" if h.get("address") else ""))
        for c in h["children"]:
            age = c.get("last_heartbeat_s")
            seen = f"heartbeat {age:.1f}s ago" if isinstance(age, int | float) else "heartbeat ?"
            if c["kind"] == "loop":
                work = f"{len(c['turns_in_flight'])}/{c.get('capacity') or '?'} turns in flight"
            else:
                work = f"{c.get('state', 'up')} · {c.get('effects_in_flight', 0)} effects in flight"
                work += f" · roots {','.join(c['roots'])}" if c.get("roots") else ""
            out.append(f"    {c['name']}#{c.get('incarnation')} {c['kind']} · {seen} · {work}")
    return out
