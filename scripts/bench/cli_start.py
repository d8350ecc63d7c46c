"""CLI start-up as a user meets it: `geode --help`, warm `geode ask` → first model request, and the first
`geode ask` after `geode serve`, each a real CLI process against a real tree on the scripted provider.

Also `geode --version` and `geode status` (a tree running, and a home nothing serves), and the last model
request → `geode ask`'s exit (one round: the only request; the scripted reply is immediate).

Run: .venv/bin/python scripts/bench/cli_start.py [--runs 10] [--cold-runs 3] [--no-cold] [--before DIR]
(``--before DIR``: `git archive <commit> actors geode | tar -x -C DIR`, that checkout's `geode ask`, `geode
status` with the tree running and `geode --version` as rows, run as ``python -m actors.cli.main``, or with
``--before-geode SCRIPT`` as that console script, e.g. another venv's ``bin/geode``: its interpreter start,
`site` and ``.pth`` files included.)
Baseline in the same run: ``python -c pass`` (to its exit), and `geode ask` through the typer app
(``GEODE_CLI_HOT=0``, as before the hot path). "→ first model request" is measured from the
CLI's spawn to the moment the ScriptedServer receives the turn's model request (same clock: the server runs
in this process). The cold rows start a fresh tree per run (``geode serve`` → ready → ``geode ask`` twice:
the second ask may land on the other loop worker) with the loop workers' background warm-up on and, with
``GEODE_WARM_WORKER=0``, off, and with the warm-up on and the first ask 3 s after serve returned (a person
typing), interleaved so machine load hits all three alike.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from actors.tree.client import stop_tree  # noqa: E402
from geode.home import GeodeHome  # noqa: E402
from geode.testing.scenario import ScriptedReply  # noqa: E402
from geode.testing.scripted import ScriptedServer  # noqa: E402

CONFIG = """
[providers]
model = "claude-sonnet-5"
[providers.anthropic]
base_url = "{url}"
[loop]
workers = 2
"""
WARM_ENV = "GEODE_WARM_WORKER"
HOT_ENV = "GEODE_CLI_HOT"
SETTLE_S = 3.0  # the "settled" cold rows: idle this long after `geode serve` returns, then ask
COLD_SETTINGS = (("on", True, 0.0), ("off", False, 0.0), ("settled", True, SETTLE_S))


class Clock:
    """The scripted model: answers "ok" and records when each request arrived (perf_counter)."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.cv = threading.Condition()

    def __call__(self, _rec: Any) -> ScriptedReply:
        with self.cv:
            self.arrivals.append(time.perf_counter())
            self.cv.notify_all()
        return ScriptedReply(text="ok")

    def count(self) -> int:
        with self.cv:
            return len(self.arrivals)

    def arrival(self, index: int, timeout_s: float = 30.0) -> float:
        with self.cv:
            if not self.cv.wait_for(lambda: len(self.arrivals) > index, timeout_s):
                raise TimeoutError("no model request")
            return self.arrivals[index]


def geode_cmd() -> list[str]:
    script = Path(sys.executable).parent / "geode"
    return [str(script)] if script.exists() else [sys.executable, "-m", "actors.cli.main"]


def make_home(base: Path, url: str) -> GeodeHome:
    home = GeodeHome(base).ensure()
    home.config_file.write_text(CONFIG.format(url=url))
    home.env_file.write_text("ANTHROPIC_API_KEY=sk-bench-key\n")
    return home


CPU: list[float] = [0.0]  # the CPU (user + system) of the last CLI process run, in seconds
BEFORE_GEODE: list[str] = []  # --before-geode: the before rows' command (else python -m actors.cli.main)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)  # reaped children only: the CLI, never the daemon
    return r.ru_utime + r.ru_stime


def run(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> float:
    c0 = _children_cpu()
    t0 = time.perf_counter()
    r = subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    CPU[0] = _children_cpu() - c0
    return time.perf_counter() - t0


def timed(args: list[str], env: dict[str, str], code: int) -> float:
    """Spawn → exit of a command that must exit with ``code`` (`geode status` with nothing running: 1)."""
    c0 = _children_cpu()
    t0 = time.perf_counter()
    r = subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    assert r.returncode == code, r.stderr.decode()[-2000:]
    CPU[0] = _children_cpu() - c0
    return time.perf_counter() - t0


def ask(env: dict[str, str], clock: Clock, before: Path | None = None) -> tuple[float, float]:
    """(spawn → first model request, spawn → exit) of one `geode ask` (of the checkout ``before``: its
    ``python -m actors.cli.main``, against the same daemon)."""
    n = clock.count()
    cmd, cwd = [*geode_cmd(), "ask", "hi"], ROOT
    if before is not None:
        cmd, cwd = [*(BEFORE_GEODE or [sys.executable, "-m", "actors.cli.main"]), "ask", "hi"], before
        env = {**env, "PYTHONPATH": str(before)}
    c0 = _children_cpu()
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
    wall = time.perf_counter() - t0
    CPU[0] = _children_cpu() - c0
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return clock.arrival(n) - t0, wall


def cold(base: Path, url: str, clock: Clock, warm: bool, settle_s: float = 0.0) -> dict[str, float]:
    """A fresh tree: serve (to ready), ``settle_s`` idle (a person typing), then two asks; ``warm`` False
    sets GEODE_WARM_WORKER=0."""
    home = make_home(base, url)
    env = {**os.environ, "GEODE_HOME": str(home.root), "PYTHONPATH": str(ROOT)}
    env[WARM_ENV] = "1" if warm else "0"
    try:
        serve = run([*geode_cmd(), "serve"], env)
        time.sleep(settle_s)
        first, first_wall = ask(env, clock)
        second, _ = ask(env, clock)
    finally:
        stop_tree(home, timeout_s=20)
    return {"serve": serve, "first": first, "first_wall": first_wall, "second": second}


def fmt(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    med = statistics.median(xs)
    return f"p50 {med * 1000:6.0f} ms   p90 {p90 * 1000:6.0f} ms   max {xs[-1] * 1000:6.0f} ms"


def p50(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--cold-runs", type=int, default=3)
    ap.add_argument("--no-cold", action="store_true", help="skip the serve → first ask rows")
    ap.add_argument("--before", type=Path, help="a checkout (git archive) whose `geode ask` is a baseline")
    ap.add_argument("--before-geode", help="the before rows' `geode` console script (e.g. another venv's)")
    opts = ap.parse_args()
    BEFORE_GEODE[:] = [opts.before_geode] if opts.before_geode else []
    clock = Clock()
    rows: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        rows.setdefault(key, []).append(value)
        rows.setdefault(f"cpu_{key}", []).append(CPU[0])  # the CPU of the process just run (see CPU)

    with ScriptedServer(clock) as server, tempfile.TemporaryDirectory(prefix="geode-cli-bench-") as tmp:
        home = make_home(Path(tmp) / "warm", server.base_url)
        env = {**os.environ, "GEODE_HOME": str(home.root), "PYTHONPATH": str(ROOT)}
        idle = GeodeHome(Path(tmp) / "idle").ensure()  # a home nothing serves (`geode status` says so)
        idle_env = {**env, "GEODE_HOME": str(idle.root)}
        run([*geode_cmd(), "serve"], env)
        try:
            ask(env, clock)  # both loop workers past their first turn, the daemon's caches warm
            ask(env, clock)
            for _ in range(opts.runs):  # interleaved, so load on the machine hits every case alike
                add("pass", run([sys.executable, "-c", "pass"], env))
                add("help", run([*geode_cmd(), "--help"], env))
                add("ask_help", run([*geode_cmd(), "ask", "--help"], env))
                add("version", run([*geode_cmd(), "--version"], env))
                add("status", run([*geode_cmd(), "status"], env))
                add("status_idle", timed([*geode_cmd(), "status"], idle_env, 1))
                to_model, wall = ask(env, clock)
                add("ask", to_model)
                add("ask_wall", wall)
                add("ask_tail", wall - to_model)  # one round: the model's only reply → the CLI's exit
                add("ask_typer", ask({**env, HOT_ENV: "0"}, clock)[0])
                if opts.before is not None:
                    before_model, before_wall = ask(env, clock, opts.before)
                    add("ask_before", before_model)
                    add("ask_before_tail", before_wall - before_model)
                    old = BEFORE_GEODE or [sys.executable, "-m", "actors.cli.main"]
                    before_env = {**env, "PYTHONPATH": str(opts.before)}
                    add("status_before", run([*old, "status"], before_env, opts.before))  # cwd: -m's path
                    add("version_before", run([*old, "--version"], before_env, opts.before))
                    if BEFORE_GEODE:  # that venv's bare interpreter start, beside this one's
                        before_python = str(Path(BEFORE_GEODE[0]).parent / "python")
                        add("pass_before", run([before_python, "-c", "pass"], env))
        finally:
            stop_tree(home, timeout_s=20)
        if not opts.no_cold:
            for i in range(opts.cold_runs):
                for tag, warm, settle in COLD_SETTINGS:
                    got = cold(Path(tmp) / f"cold-{i}-{tag}", server.base_url, clock, warm, settle)
                    for k, v in got.items():
                        add(f"{k}_{tag}", v)
    load, cmd = os.getloadavg()[0], " ".join(geode_cmd())
    print(f"{opts.runs} runs each, load average {load:.2f} on {os.cpu_count()} cores; {cmd}")
    print(f"python -c pass (to exit)                        {fmt(rows['pass'])}")
    print(f"geode --help (to exit)                          {fmt(rows['help'])}   (goal ≤ 80 ms)")
    print(f"geode ask --help (to exit)                      {fmt(rows['ask_help'])}")
    print(f"geode --version (to exit)                       {fmt(rows['version'])}   (goal ≤ 80 ms)")
    print(f"geode status, a tree running (to exit)          {fmt(rows['status'])}   (goal ≤ 120 ms)")
    print(f"geode status, nothing running (to exit)         {fmt(rows['status_idle'])}   (goal ≤ 120 ms)")
    print(f"warm geode ask → first model request            {fmt(rows['ask'])}   (goal ≤ 80 ms)")
    print(f"warm geode ask → exit                           {fmt(rows['ask_wall'])}")
    print(f"warm last model request → geode ask exits       {fmt(rows['ask_tail'])}   (goal ≤ 30 ms)")
    print(f"warm geode ask → first model request, typer app {fmt(rows['ask_typer'])}   ({HOT_ENV}=0)")
    if opts.before is not None:
        print(f"warm geode ask → first model request, before  {fmt(rows['ask_before'])}   ({opts.before})")
        print(f"warm last model request → exit, before        {fmt(rows['ask_before_tail'])}")
        print(f"geode status, a tree running, before          {fmt(rows['status_before'])}")
        print(f"geode --version, before                       {fmt(rows['version_before'])}")
        if BEFORE_GEODE:
            print(f"python -c pass, before                        {fmt(rows['pass_before'])}")
    base = p50(rows["pass"])
    print(
        f"ratios to python -c pass (p50): --help {p50(rows['help']) / base:.1f}x, ask → model request "
        f"{p50(rows['ask']) / base:.1f}x"
    )
    cpu = {"pass": "python -c pass", "help": "geode --help", "version": "geode --version"}
    cpu |= {"status": "geode status, a tree running", "status_idle": "geode status, nothing running"}
    cpu |= {"ask_wall": "warm geode ask (whole process)", "ask_typer": "warm geode ask, typer app"}
    cpu |= {"ask_before": "warm geode ask, before", "status_before": "geode status, a tree running, before"}
    cpu |= {"version_before": "geode --version, before", "pass_before": "python -c pass, before"}
    print("CPU (user + system) of the CLI process, p50 (less moved by the load than wall time):")
    for key, title in cpu.items():
        if f"cpu_{key}" in rows:
            print(f"  {title:<42} {p50(rows[f'cpu_{key}']) * 1000:6.0f} ms")
    if opts.no_cold:
        return
    print(f"cold: a fresh tree per run, {opts.cold_runs} runs per setting")
    titles = {
        "on": "worker warm-up on, ask at once",
        "off": "worker warm-up off (GEODE_WARM_WORKER=0), ask at once",
        "settled": f"worker warm-up on, ask {SETTLE_S:g} s after serve returned",
    }
    for tag, title in titles.items():
        print(f"  {title}:")
        print(f"    geode serve (to ready)                      {fmt(rows[f'serve_{tag}'])}")
        print(f"    first ask → first model request             {fmt(rows[f'first_{tag}'])}")
        print(f"    first ask → exit                            {fmt(rows[f'first_wall_{tag}'])}")
        serve_ask = [s + a for s, a in zip(rows[f"serve_{tag}"], rows[f"first_{tag}"], strict=True)]
        print(f"    serve + first ask → first model request     {fmt(serve_ask)}   (idle time not counted)")
        print(f"    second ask → first model request            {fmt(rows[f'second_{tag}'])}")


if __name__ == "__main__":
    main()
