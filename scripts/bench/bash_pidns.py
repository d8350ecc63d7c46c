"""What a run_bash call's PID namespace costs: `true` through ``run_bash`` with and without one (figures).

Run: .venv/bin/python scripts/bench/bash_pidns.py [--n 40] [--rounds 3]
Modes (interleaved per round, so machine load hits both alike): ``pidns`` (the default: the subreaper forks
the namespace's init, which mounts its /proc and forks the shell), ``subreaper`` (``pid_namespace`` off: the
shell forked by the subreaper, as before issue 26), and a plain ``bash -c true`` (``subprocess.run``) for
scale. Each call is the whole run_bash path (cgroup where writable, gate, capped pipes, containment close).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from geode.tools.builtin.bash import BashLimits, run_bash
from geode.tools.handlers import ToolEnv
from geode.tools.spec import ToolContext


def _env(ws: Path, pidns: bool) -> ToolEnv:
    ctx = ToolContext(session_id="b", turn_id="t", step_id="s", operation_id="op", workspace=str(ws))
    limits = BashLimits(pid_namespace=pidns)
    return ToolEnv(ctx=ctx, workspace=ws, roots=(ws,), deadline_s=60, services={"bash_limits": limits})


def _time(fn: object, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        ws = Path(d)
        envs = {"pidns": _env(ws, True), "subreaper": _env(ws, False)}
        first = run_bash({"command": "true"}, envs["pidns"])
        print(f"containment with a namespace: {first['containment']} ({first.get('note', 'no note')})")
        runs: dict[str, list[float]] = {"pidns": [], "subreaper": [], "plain bash": []}
        for _ in range(a.rounds):
            for mode, env in envs.items():
                runs[mode] += _time(lambda env=env: run_bash({"command": "true"}, env), a.n)
            runs["plain bash"] += _time(lambda: subprocess.run(["/bin/bash", "-c", "true"], check=True), a.n)
    base = statistics.median(runs["subreaper"])
    print(f"{'mode':<12}{'p50 ms':>10}{'p90 ms':>10}{'mean ms':>10}{'vs subreaper':>15}")
    for mode, xs in runs.items():
        p50, p90 = statistics.median(xs), statistics.quantiles(xs, n=10)[8]
        print(f"{mode:<12}{p50:>10.1f}{p90:>10.1f}{statistics.fmean(xs):>10.1f}{p50 - base:>+13.1f}ms")


if __name__ == "__main__":
    main()
