"""`geode status`'s table of the tree — each child, the fork server, the supervisor, the total memory —
from a ``runtime.tree.status`` reply as data (both ways of `geode status` print it)."""

from __future__ import annotations

from typing import Any


def _mib(n: int | None) -> str:
    return f"{'-':>8}" if n is None else f"{n / 2**20:>8.1f}"


def shown_state(c: dict[str, Any]) -> str:
    """STATE: ``backoff (next try in 1.6 s)``, ``fatal (11 restarts within 10 s; geode restart NAME)``."""
    if c["state"] == "backoff" and c.get("next_try_s") is not None:
        return f"backoff (next try in {c['next_try_s']:.1f} s)"
    if c["state"] == "fatal" and c.get("reason"):
        return f"fatal ({c['reason']}; geode restart {c['name']})"
    return str(c["state"])


def tree_lines(st: dict[str, Any]) -> list[str]:
    """The children's table, then the zygote, the supervisor and the tree's total memory (MiB), from a
    ``runtime.tree.status`` reply as data."""
    head = f"{'NAME':<12} {'PID':>7} {'INC':>4} {'UPTIME':>9} {'RESTARTS':>8}"
    lines = [f"{head} {'RSS MiB':>8} {'PSS MiB':>8} STATE"]
    for c in st["children"]:
        pid = c.get("pid") or "-"
        mem = f"{_mib(c.get('rss_bytes'))} {_mib(c.get('pss_bytes'))}"
        mem = f"{'':>17}" if st.get("single_process") else mem
        row = f"{c['name']:<12} {pid:>7} {c['incarnation']:>4} {c['uptime_s']:>8.1f}s {c['restarts']:>8}"
        lines.append(f"{row} {mem} {shown_state(c)}")
    gap = " " * 23  # INC, UPTIME, RESTARTS
    if st.get("zygote") is not None:
        z = st["zygote"]
        z_mem = f"{_mib(z['rss_bytes'])} {_mib(z['pss_bytes'])}"
        lines.append(f"{'zygote':<12} {z['pid']:>7} {gap} {z_mem} fork server")
    own = f"{_mib(st.get('rss_bytes'))} {_mib(st.get('pss_bytes'))}"
    lines.append(f"{'supervisor':<12} {st['pid']:>7} {gap} {own}")
    if st.get("total") is not None:
        t = st["total"]
        what = f"total of {t['processes']} processes (RSS counts a shared page in each)"
        lines.append(f"{'':<12} {'':>7} {gap} {_mib(t['rss_bytes'])} {_mib(t['pss_bytes'])} {what}")
    return lines
