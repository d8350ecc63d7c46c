"""The tree's memory (PSS and RSS per process and in total) at rest and after five turns, with the zygote
(children forked from a pre-imported parent) and without it (``GEODE_ZYGOTE=0``: children exec'd, the
baseline), one after the other in the same run; the figures are the ones ``geode status --json`` reports.

Run: .venv/bin/python scripts/bench/tree_memory.py [--turns 5] [--profile] [--no-warm-worker] [--zygote-only]
Each tree runs in its own temporary GEODE_HOME on the default config, with the scripted provider (a local
fake Anthropic server answering "pong"). "At rest" is after every child is running and the tree's total PSS
has stopped moving (the zygote imports the provider SDKs in the background after the first children start).
``--profile`` adds, per process, where its PSS is (private anonymous memory = the Python heap and what was
un-shared from the zygote; file-backed = shared libraries and mapped files) and its loaded modules.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from actors.tree.proc_memory import rollup  # noqa: E402
from geode.home import GeodeHome  # noqa: E402
from geode.testing.scripted import ScriptedServer  # noqa: E402

MIB = 2**20
GOAL_REST, GOAL_TURNS = 160, 180  # MiB of tree PSS (issue 34: at rest, after 100 turns; issue 16: 120, 160)
EXTRA_ENV: dict[str, str] = {}  # --no-warm-worker: GEODE_WARM_WORKER=0 in both trees
MAPPINGS = False  # --mappings: private dirty per mapping kind and process
BEFORE = "PSS 208 MiB at start (RSS 344 MiB, 8 processes), 336 MiB after five turns (exec'd children)"


def cli(home: GeodeHome, zygote: bool, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GEODE_HOME": str(home.root), "PYTHONPATH": str(ROOT)}
    env["GEODE_ZYGOTE"] = "1" if zygote else "0"
    env.update(EXTRA_ENV)
    return subprocess.run(
        [sys.executable, "-m", "actors.cli.main", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def make_home(base: Path, server: ScriptedServer) -> GeodeHome:
    home = GeodeHome(base / "gh").ensure()
    home.config_file.write_text(
        f'[providers]\nmodel = "claude-sonnet-5"\n[providers.anthropic]\nbase_url = "{server.base_url}"\n'
    )
    home.env_file.write_text("ANTHROPIC_API_KEY=sk-bench-key\n")
    return home


def status(home: GeodeHome, zygote: bool) -> dict[str, Any]:
    r = cli(home, zygote, "status", "--json", timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def processes(st: dict[str, Any]) -> list[tuple[str, int, int, int]]:
    """(name, pid, rss, pss) for the supervisor, the zygote and every child, as `geode status --json` says."""
    rows = [("supervisor", st["pid"], st["rss_bytes"], st["pss_bytes"])]
    if st.get("zygote"):
        z = st["zygote"]
        rows.append(("zygote", z["pid"], z["rss_bytes"], z["pss_bytes"]))
    rows += [(c["name"], c["pid"], c["rss_bytes"] or 0, c["pss_bytes"] or 0) for c in st["children"]]
    return rows


def settle(home: GeodeHome, zygote: bool, limit_s: float = 60.0) -> dict[str, Any]:
    """Poll until every child runs (no loop worker left to swap for a fork with the SDKs: ``swap``) and the
    total PSS moved < 1 MiB over the last 3 samples (0.5 s apart)."""
    end = time.monotonic() + limit_s
    seen: list[int] = []
    st = status(home, zygote)
    while time.monotonic() < end:
        st = status(home, zygote)
        up = all(c["state"] == "running" and c["rss_bytes"] and not c.get("swap") for c in st["children"])
        if up and st.get("total"):
            seen.append(st["total"]["pss_bytes"])
            if len(seen) >= 3 and max(seen[-3:]) - min(seen[-3:]) < MIB:
                return st
        time.sleep(0.5)  # a bench's sampling period, not a test wait
    print(f"  (not settled within {limit_s:.0f} s; last sample used)")
    return st


def modules_of(pid: int) -> str:
    """Shared objects mapped (extension modules and libraries): how much native code the process carries."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return "?"
    libs = {line.split()[-1] for line in maps if line.endswith(".so") or ".so." in line.rsplit("/", 1)[-1]}
    return f"{len(libs)} .so"


def show(title: str, st: dict[str, Any], profile: bool) -> None:
    print(f"  {title}")
    head = f"    {'process':<12} {'pid':>7} {'RSS MiB':>8} {'PSS MiB':>8}"
    if profile:
        head += f" {'anon PSS':>9} {'file PSS':>9} {'priv dirty':>10}  mapped"
    print(head)
    for name, pid, rss, pss in processes(st):
        line = f"    {name:<12} {pid:>7} {rss / MIB:>8.1f} {pss / MIB:>8.1f}"
        if profile:
            r = rollup(pid) or {}
            anon, file = r.get("Pss_Anon", 0), r.get("Pss_File", 0)
            priv = r.get("Private_Dirty", 0)
            line += f" {anon / MIB:>9.1f} {file / MIB:>9.1f} {priv / MIB:>10.1f}  {modules_of(pid)}"
        print(line)
    t = st["total"]
    print(f"    {'total':<12} {t['processes']:>6}p {t['rss_bytes'] / MIB:>8.1f} {t['pss_bytes'] / MIB:>8.1f}")
    print(f"    anonymous PSS {anon_pss(st) / MIB:.1f} MiB (the tree's heap: no file page others share)")
    if MAPPINGS:
        show_kinds(st)


KINDS = ("heap", "arena1M", "anon", "stacks", "lmdb", "libpython", "so", "other")


def kind_of(size_kib: int, perms: str, path: str) -> str:
    """A mapping's kind: glibc's ``[heap]``, pymalloc's 1 MiB arenas, thread stacks (8 MiB), other anonymous
    mappings (glibc's thread arenas, large mallocs), LMDB's file map, libpython, other shared objects."""
    if path == "[heap]":
        return "heap"
    if path.endswith(".mdb"):
        return "lmdb"
    name = path.rsplit("/", 1)[-1]
    if "libpython" in name or name.startswith("python3"):
        return "libpython"
    if ".so" in name:
        return "so"
    if path:
        return "other"
    if perms.startswith("---"):
        return "other"  # guard pages, reserved arena tails: nothing resident
    return "stacks" if size_kib in (8188, 8192) else "arena1M" if size_kib == 1024 else "anon"


def private_by_kind(pid: int) -> dict[str, int]:
    """Private dirty KiB per mapping kind (``/proc/<pid>/smaps``): where a child's own pages are."""
    try:
        text = Path(f"/proc/{pid}/smaps").read_text()
    except OSError:
        return {}
    out: dict[str, int] = dict.fromkeys(KINDS, 0)
    kind = "other"
    for line in text.splitlines():
        head = line.split(None, 5)
        if head and "-" in head[0] and ":" not in head[0]:
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            kind = kind_of((hi - lo) // 1024, head[1], head[5].strip() if len(head) > 5 else "")
        elif head and head[0] == "Private_Dirty:":
            out[kind] += int(head[1])
    return out


def show_kinds(st: dict[str, Any]) -> None:
    print(f"    private dirty MiB by mapping: {'process':<12} " + " ".join(f"{k:>9}" for k in KINDS))
    sums = dict.fromkeys(KINDS, 0)
    for name, pid, _, _ in processes(st):
        kinds = private_by_kind(pid)
        for k in KINDS:
            sums[k] += kinds.get(k, 0)
        print(f"{'':<34}{name:<12} " + " ".join(f"{kinds.get(k, 0) / 1024:>9.2f}" for k in KINDS))
    print(f"{'':<34}{'total':<12} " + " ".join(f"{sums[k] / 1024:>9.2f}" for k in KINDS))


def anon_pss(st: dict[str, Any]) -> int:
    """The tree's ``Pss_Anon``: its PSS without file-backed pages (libpython, .so files), whose share moves
    with whatever else on the machine maps them (other Python processes: ±3 MiB of the total between runs)."""
    return sum((rollup(pid) or {}).get("Pss_Anon", 0) for _, pid, _, _ in processes(st))


Figures = tuple[float, float, float, float]


def run_tree(server: ScriptedServer, zygote: bool, turns: int, profile: bool) -> Figures:
    """(rest PSS, rest RSS, turns PSS, turns RSS) in MiB for one tree."""
    with tempfile.TemporaryDirectory(prefix="geode-mem-") as tmp:
        home = make_home(Path(tmp), server)
        label = "zygote (children forked)" if zygote else "GEODE_ZYGOTE=0 (children exec'd)"
        print(f"\n== {label}")
        r = cli(home, zygote, "serve")
        assert r.returncode == 0, r.stdout + r.stderr
        try:
            rest = settle(home, zygote)
            show("at rest", rest, profile)
            for i in range(turns):
                a = cli(home, zygote, "ask", f"turn {i}: say pong", "--json")
                assert a.returncode == 0 and "pong" in a.stdout, a.stdout + a.stderr
            after = settle(home, zygote)
            show(f"after {turns} turns", after, profile)
        finally:
            cli(home, zygote, "stop")
    t0, t1 = rest["total"], after["total"]
    return t0["pss_bytes"] / MIB, t0["rss_bytes"] / MIB, t1["pss_bytes"] / MIB, t1["rss_bytes"] / MIB


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="per-process anon/file PSS and mapped libraries")
    ap.add_argument("--zygote-only", action="store_true", help="skip the baseline (no ratio)")
    ap.add_argument(
        "--no-warm-worker", action="store_true", help="GEODE_WARM_WORKER=0 (SDK imported at the 1st turn)"
    )
    ap.add_argument(
        "--mappings", action="store_true", help="private dirty per mapping kind (smaps), per process"
    )
    args = ap.parse_args()
    global MAPPINGS
    MAPPINGS = args.mappings
    if args.no_warm_worker:
        EXTRA_ENV["GEODE_WARM_WORKER"] = "0"
    load = os.getloadavg()[0]
    server = ScriptedServer(lambda req: {"text": "pong"}).start()
    try:
        forked = run_tree(server, True, args.turns, args.profile)
        execd = forked if args.zygote_only else run_tree(server, False, args.turns, args.profile)
    finally:
        server.stop()
    now = os.getloadavg()[0]
    print(f"\nload average (1 min) before/after: {load:.1f} / {now:.1f} on {os.cpu_count()} cores")
    print(f"before issue 16: {BEFORE}")
    print(f"extra environment of both trees: {EXTRA_ENV or 'none'}")
    print(f"{'':<34} {'rest PSS':>9} {'rest RSS':>9} {'turns PSS':>10} {'turns RSS':>10}  (MiB)")
    for name, v in (("zygote", forked), ("GEODE_ZYGOTE=0 (baseline)", execd)):
        print(f"{name:<34} {v[0]:>9.1f} {v[1]:>9.1f} {v[2]:>10.1f} {v[3]:>10.1f}")
    print(
        f"{'ratio zygote / baseline':<34} {forked[0] / execd[0]:>8.2f}x {forked[1] / execd[1]:>8.2f}x"
        f" {forked[2] / execd[2]:>9.2f}x {forked[3] / execd[3]:>9.2f}x"
    )
    goals = (("at rest", forked[0], GOAL_REST), (f"after {args.turns} turns", forked[2], GOAL_TURNS))
    for what, got, goal in goals:
        verdict = "met" if got <= goal else "MISSED"
        print(f"goal: tree PSS {what} <= {goal} MiB: {got:.1f} MiB, {verdict}")


if __name__ == "__main__":
    main()
