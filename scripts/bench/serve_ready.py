"""`geode serve` → ready (every child running), with where the time goes, and the tree's PSS at rest.

Each run serves a fresh GEODE_HOME (default config, the scripted provider) and times the whole `geode serve`
command as a user runs it. The phases come from ``/proc`` (the daemon's and the zygote's process start) and
from the tree's own logs (wall-clock stamps, ms): the supervisor's first line (after the daemon's imports and
the config check), the zygote ready (its imports: every child's code; the old tree: and the provider SDKs;
``zygote.log`` has each import's time), the first child started, the SDKs imported (this tree: on demand,
for the first loop worker), the last child ready (first incarnations), the loop workers swapped (this tree:
they are forked before the SDKs and swapped, once idle, for forks that carry them). Then, 3 s after the swap
(after ready for a tree without one), the tree's PSS (supervisor, zygote, children) from
``/proc/<pid>/smaps_rollup``.

``--old DIR`` alternates runs of another checkout (``git worktree add DIR REV``; run with this venv,
``PYTHONPATH=DIR``) with this one, so before and after share the machine's load; each line says the load.

``--first-ask`` also times one `geode ask` issued as soon as `geode serve` returned (before the swap).

Run: .venv/bin/python scripts/bench/serve_ready.py [--runs 5] [--old /tmp/old-tree] [--first-ask]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from geode.home import GeodeHome  # noqa: E402
from geode.testing.scripted import ScriptedServer  # noqa: E402

MARKS = (  # (phase, substring of a supervisor.log line; the first line that has it)
    ("supervisor logging", ""),
    ("zygote ready", "children fork from it"),
    ("first child started", "supervisor: started "),
    ("SDKs imported", "zygote imported the SDKs"),
)
CLK = os.sysconf("SC_CLK_TCK")


def proc_start(pid: int) -> float:
    """When ``pid`` started (wall clock), from /proc/<pid>/stat and the boot time."""
    boot = time.time() - float(Path("/proc/uptime").read_text().split()[0])
    return boot + int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]) / CLK


def stamp(line: str) -> float | None:
    try:
        return dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return None


def phases(home: GeodeHome, t0: float) -> dict[str, float]:
    lines = (home.logs_dir / "supervisor.log").read_text().splitlines()
    out: dict[str, float] = {}
    for phase, key in MARKS:
        hit = next((ln for ln in lines if key in ln and stamp(ln) is not None), None)
        if hit is not None:
            out[phase] = (stamp(hit) or t0) - t0
    ready = [stamp(ln) for ln in lines if "#1 ready (pid " in ln]  # the first incarnations
    if ready:
        out["last child ready"] = max(t for t in ready if t is not None) - t0
    swapped = [stamp(ln) for ln in lines if "swapped in, with the SDKs" in ln]  # this tree: loop workers
    if swapped:
        out["loop workers swapped"] = max(t for t in swapped if t is not None) - t0
    return out


def status(home: GeodeHome, src: Path) -> dict[str, Any]:
    r = subprocess.run(
        [sys.executable, "-m", "actors.cli.main", "status", "--json"],
        env=_env(home, src),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return dict(json.loads(r.stdout))


def wait_swapped(home: GeodeHome, src: Path, limit_s: float = 120.0) -> None:
    """This tree is ready before the zygote imports the SDKs and then swaps its loop workers for forks that
    carry them (``swap`` in `geode status --json`); the PSS is measured after (the old tree has no swap)."""
    end = time.monotonic() + limit_s
    while any(c.get("swap") for c in status(home, src)["children"]) and time.monotonic() < end:
        time.sleep(0.1)  # a bench's poll interval, not a test wait


def pss_mib(home: GeodeHome, src: Path, t0: float, marks: dict[str, float]) -> float:
    st = status(home, src)
    marks["daemon started"] = proc_start(st["pid"]) - t0
    if st.get("zygote"):  # the one serving now: started with the tree unless it was restarted
        marks["zygote started"] = proc_start(st["zygote"]["pid"]) - t0
    pids = [st["pid"]] + ([st["zygote"]["pid"]] if st.get("zygote") else [])
    pids += [c["pid"] for c in st["children"] if c.get("pid")]
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1])
    return total / 1024


def _env(home: GeodeHome, src: Path) -> dict[str, str]:
    return {**os.environ, "GEODE_HOME": str(home.root), "PYTHONPATH": str(src)}


def first_ask(home: GeodeHome, src: Path) -> float:
    """Wall time of one `geode ask` issued as soon as `geode serve` returned (this tree: on a loop worker
    forked before the SDKs, which then imports the SDK itself)."""
    t0 = time.time()
    r = subprocess.run(
        [sys.executable, "-m", "actors.cli.main", "ask", "ping", "--json"],
        env=_env(home, src),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "pong" in r.stdout, r.stdout + r.stderr
    return time.time() - t0


def one(server: ScriptedServer, src: Path, ask: bool = False) -> tuple[float, dict[str, float], float, float]:
    base = Path(tempfile.mkdtemp(prefix="geode-ready-", dir="/tmp"))
    home = GeodeHome(base / "gh").ensure()
    home.config_file.write_text(
        f'[providers]\nmodel = "claude-sonnet-5"\n[providers.anthropic]\nbase_url = "{server.base_url}"\n'
    )
    home.env_file.write_text("ANTHROPIC_API_KEY=sk-bench-key\n")
    load = os.getloadavg()[0]
    t0 = time.time()
    r = subprocess.run(
        [sys.executable, "-m", "actors.cli.main", "serve"],
        env=_env(home, src),
        cwd=base,
        capture_output=True,
        text=True,
        timeout=120,
    )
    wall = time.time() - t0
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        asked = first_ask(home, src) if ask else None
        wait_swapped(home, src)
        marks = phases(home, t0)
        if asked is not None:
            marks["first ask (wall)"] = asked
        time.sleep(3.0)  # at rest: the bench's settle time, not a test wait
        pss = pss_mib(home, src, t0, marks)
    finally:
        subprocess.run(
            [sys.executable, "-m", "actors.cli.main", "stop"], env=_env(home, src), capture_output=True
        )
    return wall, marks, pss, load


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--old", default="", help="another checkout to alternate with (the baseline)")
    ap.add_argument("--first-ask", action="store_true", help="time a `geode ask` issued at once after ready")
    args = ap.parse_args()
    trees = [("this", ROOT)] + ([("old", Path(args.old).resolve())] if args.old else [])
    results: dict[str, list[tuple[float, dict[str, float], float, float]]] = {n: [] for n, _ in trees}
    with ScriptedServer(lambda req: {"text": "pong"}) as server:
        for i in range(args.runs):
            for name, src in trees if i % 2 == 0 else list(reversed(trees)):
                wall, marks, pss, load = one(server, src, args.first_ask)
                results[name].append((wall, marks, pss, load))
                detail = "  ".join(f"{k} {v:.2f}" for k, v in marks.items())
                head = f"{name:5s} run {i + 1}: ready {wall:.2f} s  PSS {pss:.0f} MiB  load {load:.1f}"
                print(f"{head}  | {detail}")
    for name, rows in results.items():
        walls = [r[0] for r in rows]
        keys = ["daemon started", "zygote started"] + [k for k, _ in MARKS]
        keys += ["last child ready", "loop workers swapped", "first ask (wall)"]
        med = {
            k: statistics.median([r[1][k] for r in rows if k in r[1]])
            for k in keys
            if any(k in r[1] for r in rows)
        }
        print(
            f"{name}: ready p50 {statistics.median(walls):.2f} s"
            f" (min {min(walls):.2f}, max {max(walls):.2f}),"
            f" PSS p50 {statistics.median([r[2] for r in rows]):.0f} MiB, load {min(r[3] for r in rows):.1f}"
            f"-{max(r[3] for r in rows):.1f}; phase p50: " + ", ".join(f"{k} {v:.2f}" for k, v in med.items())
        )


if __name__ == "__main__":
    main()
