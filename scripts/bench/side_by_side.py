"""Side by side with the published GEODE (geode-agent 1.0.32 from PyPI, in its own Python 3.12 venv under
.bench/): both hosts' stdio MCP servers (`run_agent`) on the same Anthropic-wire fake and scenario.

Scenario (as /work/shared/reference/reference-performance.md): K read-only tool rounds then a final text,
K = 5 and 20; the fake answers at once (~0.3 ms) with TCP_NODELAY and runs in its own process. "Gap" = host
time between the fake writing its reply for main round i and receiving the request for round i+1 (whatever the
host does in between, side model calls included). Per host and K: one warm-up call, then ``--runs`` calls
(the hosts alternate call by call), pooled; median / p90 gap, the gap at the first and the last rounds,
the run_agent wall; the ratio published / this.
This project's `geode mcp` runs against a `geode serve` daemon on the same GEODE_HOME.

Run: .venv/bin/python scripts/bench/side_by_side.py [--runs 3] [--quick]
The published venv is created once (``.bench/published-venv``); without network/PyPI the script says so and
exits 0 (nothing measured).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_anthropic import FakeProcess, turn_gaps  # noqa: E402

PUBLISHED = "geode-agent==1.0.32"
VENV = ROOT / ".bench" / "published-venv"
PY312 = ("/root/.pyenv/versions/3.12.1/bin/python", "python3.12")
MODEL = "claude-sonnet-5"


def published_venv() -> Path | None:
    """The published GEODE's geode-mcp, installing it once; None (and a message) if it cannot be."""
    exe = VENV / "bin" / "geode-mcp"
    if exe.exists():
        return exe
    py = next((p for p in PY312 if shutil.which(p)), None)
    if py is None:
        print("side_by_side: no Python 3.12 (tried " + ", ".join(PY312) + "): skipped")
        return None
    print(f"side_by_side: creating {VENV} and installing {PUBLISHED} (once)...", flush=True)
    try:
        subprocess.run([py, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", PUBLISHED], check=True, timeout=900)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        shutil.rmtree(VENV, ignore_errors=True)
        print(f"side_by_side: could not install {PUBLISHED} ({exc}): skipped")
        return None
    return exe if exe.exists() else None


@dataclass
class Host:
    name: str
    command: str
    args: list[str]
    env: dict[str, str]
    cwd: Path
    gaps: dict[int, list[list[float]]] = field(default_factory=dict)  # K -> per run, per round
    walls: dict[int, list[float]] = field(default_factory=dict)
    side_calls: dict[int, int] = field(default_factory=dict)
    reasons: dict[int, set[str]] = field(default_factory=dict)
    tools: set[str] = field(default_factory=set)
    roots: list[int] = field(default_factory=list)  # its processes (the MCP server; our daemon's supervisor)
    cpu: dict[int, list[float]] = field(default_factory=dict)  # K -> CPU s of its processes per call


def _stat(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return []


def children_of(parent: int) -> set[int]:
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st and int(st[1]) == parent:
                out.add(int(d))
    return out


def tree_cpu(roots: list[int]) -> float:
    """CPU seconds (user + system) of ``roots`` and every descendant alive now."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st:
                kids.setdefault(int(st[1]), []).append(int(d))
    total, todo, seen = 0.0, list(roots), set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        st = _stat(pid)
        if st:
            total += (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
        todo += kids.get(pid, [])
    return total


async def one_call(host: Host, session: Any, fake: FakeProcess, k: int, i: int) -> None:
    """One run_agent call of K rounds; recorded unless it is the warm-up (``i`` 0)."""
    tag = f"{host.name}-k{k}-r{i}-{time.time_ns()}"
    prompt = f"bench-turn-{tag} k={k} find data-<round>.txt each round, then say done"
    fake.collect()
    cpu0 = tree_cpu(host.roots)
    t0 = time.monotonic()
    res = await session.call_tool("run_agent", {"prompt": prompt}, read_timeout_seconds=600)
    wall = time.monotonic() - t0
    cpu = tree_cpu(host.roots) - cpu0
    hits, _ = fake.collect()
    out: dict[str, Any] = dict(res.structured_content or {})
    if res.is_error or not out:
        raise RuntimeError(f"{host.name} run_agent failed: {res.content}")
    mine = [h for h in hits if h.tag == tag]
    gaps = turn_gaps(mine).get(tag, [])
    if len(gaps) != k:
        raise RuntimeError(f"{host.name} K={k}: {len(gaps)} gaps, result {out}")
    if i == 0:
        return  # warm-up
    host.gaps.setdefault(k, []).append(gaps)
    host.walls.setdefault(k, []).append(wall)
    host.cpu.setdefault(k, []).append(cpu)
    host.side_calls[k] = host.side_calls.get(k, 0) + sum(not h.main for h in mine)
    host.reasons.setdefault(k, set()).add(str(out.get("termination_reason")))
    host.tools |= {h.tool for h in mine if h.tool}


async def drive(hosts: list[Host], fake: FakeProcess, ks: list[int], runs: int, logs: Path) -> None:
    """One stdio MCP session per host, both open; per K a warm-up call each, then ``runs`` calls each,
    alternating hosts call by call (one call at a time), so load from elsewhere falls on both alike."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    logging.getLogger("mcp").setLevel(logging.CRITICAL)  # a stray stdout line of a server is logged there
    async with AsyncExitStack() as stack:
        sessions = []
        for h in hosts:
            params = StdioServerParameters(command=h.command, args=h.args, env=h.env, cwd=str(h.cwd))
            err = stack.enter_context((logs / f"{h.name}-stderr.log").open("a"))
            before = children_of(os.getpid())
            read, write = await stack.enter_async_context(stdio_client(params, errlog=err))
            h.roots += sorted(children_of(os.getpid()) - before)  # its MCP server process
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions.append(session)
        for k in ks:
            for i in range(runs + 1):
                for h, session in zip(hosts, sessions, strict=True):
                    await one_call(h, session, fake, k, i)


def ours(base: Path, url: str, ws: Path) -> tuple[Host, dict[str, str]]:
    home = base / "gh"
    home.mkdir(parents=True)
    (home / "config.toml").write_text(
        f'[providers]\nmodel = "{MODEL}"\n[providers.anthropic]\nbase_url = "{url}"\n'
        f'[tools]\nroots = ["{ws}"]\n'
    )
    (home / ".env").write_text("ANTHROPIC_API_KEY=sk-bench-key\n")
    env = {**os.environ, "GEODE_HOME": str(home), "PYTHONPATH": str(ROOT)}
    env.pop("ANTHROPIC_BASE_URL", None)
    exe = Path(sys.executable).parent / "geode"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "actors.cli.main"]
    return Host("this", cmd[0], [*cmd[1:], "mcp"], env, ws), env


def published(base: Path, url: str, ws: Path, exe: Path) -> Host:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(base / "pub-home"),
        "GEODE_HOME": str(base / "pub-home" / ".geode"),
        "ANTHROPIC_API_KEY": "sk-ant-bench-key",
        "ANTHROPIC_BASE_URL": url,
    }
    Path(env["HOME"]).mkdir()
    return Host("published", str(exe), [], env, ws)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def ms(x: float) -> str:
    return f"{x * 1000:7.1f}"


def report(hosts: list[Host], ks: list[int]) -> None:
    print(f"\nload average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    print("gap = fake's reply for round i written -> request for round i+1 arrived (ms);")
    print("CPU/call = CPU time of the host's processes during one run_agent call (ms)")
    for k in ks:
        print(f"\nK = {k}")
        print(
            f"  {'host':10} {'gap p50':>8} {'gap p90':>8} {'rounds 1-2':>10} {'last 2':>8}"
            f" {'wall p50':>9} {'CPU/call':>8} {'side calls/run':>14}  termination"
        )
        med: dict[str, float] = {}
        for h in hosts:
            runs = h.gaps.get(k, [])
            if not runs:
                continue
            pooled = [g for r in runs for g in r]
            first = [g for r in runs for g in r[:2]]
            last = [g for r in runs for g in r[-2:]]
            med[h.name] = statistics.median(pooled)
            print(
                f"  {h.name:10} {ms(med[h.name])} {ms(pct(pooled, 0.9))} {ms(statistics.median(first)):>10}"
                f" {ms(statistics.median(last))} {ms(statistics.median(h.walls[k])):>9}"
                f" {ms(statistics.median(h.cpu[k])):>8}"
                f" {h.side_calls.get(k, 0) / len(runs):14.1f}  {','.join(sorted(h.reasons.get(k, ())))}"
            )
        if "this" in med and "published" in med:
            print(f"  ratio published / this, gap p50: {med['published'] / med['this']:.1f}x  (goal >= 15x)")
            pw = statistics.median(next(h for h in hosts if h.name == "published").walls[k])
            tw = statistics.median(next(h for h in hosts if h.name == "this").walls[k])
            print(f"  ratio published / this, run_agent wall p50: {pw / tw:.1f}x")
    if len(ks) > 1:
        lo, hi = min(ks), max(ks)
        per: dict[str, float] = {}
        for h in hosts:
            if h.cpu.get(lo) and h.cpu.get(hi):
                extra = statistics.median(h.cpu[hi]) - statistics.median(h.cpu[lo])
                per[h.name] = extra / (hi - lo)
                print(f"\n  {h.name}: host CPU per extra tool round (K={hi} vs K={lo}): {ms(per[h.name])} ms")
        if "this" in per and "published" in per and per["this"] > 0:
            print(f"  ratio published / this, CPU per tool round: {per['published'] / per['this']:.1f}x")
    for h in hosts:
        print(f"  {h.name}: tools called {sorted(h.tools)}; processes counted: {h.roots} and descendants")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--runs", type=int, default=3, help="measured run_agent calls per host and K")
    ap.add_argument("--quick", action="store_true", help="K = 5 only, one measured run")
    ap.add_argument("--only", choices=("this", "published"), help="drive one host only")
    ap.add_argument(
        "--tool", default="glob_files", help="the read-only tool to call (both hosts have glob_files)"
    )
    args = ap.parse_args()
    ks, runs = ([5], 1) if args.quick else ([5, 20], args.runs)
    exe = None if args.only == "this" else published_venv()
    if exe is None and args.only != "this":
        print("side_by_side: the published GEODE is not available; measuring this project only")
    from actors.tree.client import stop_tree, tree_status
    from geode.home import GeodeHome

    with tempfile.TemporaryDirectory(prefix="geode-sbs-", dir="/tmp") as tmp:
        base = Path(tmp)
        ws = base / "ws"
        ws.mkdir()
        for i in range(64):  # the fake's glob_files finds data-<round>.txt: a new result every round
            (ws / f"data-{i}.txt").write_text(f"line {i}\n")
        with FakeProcess(str(ws / "data-0.txt"), prefer=args.tool) as fake:
            hosts: list[Host] = []
            if exe is not None:
                hosts.append(published(base, fake.base_url, ws, exe))
            if args.only != "published":
                this, env = ours(base, fake.base_url, ws)
                subprocess.run([this.command, *this.args[:-1], "serve"], env=env, check=True, cwd=ws)
                st = tree_status(GeodeHome(base / "gh"))
                this.roots = [st.pid] if st is not None else []  # the daemon's supervisor (and its tree)
                hosts.append(this)
            try:
                print("driving " + " and ".join(h.name for h in hosts) + ", alternating ...", flush=True)
                asyncio.run(drive(hosts, fake, ks, runs, base))
            finally:
                if args.only != "published":
                    stop_tree(GeodeHome(base / "gh"), timeout_s=20)
        report(hosts, ks)


if __name__ == "__main__":
    main()
