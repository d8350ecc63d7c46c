"""Metrics off cost nothing (prometheus_client never imported by any instrumented module); the metric names
the instruments register are the ones names.py lists; the shipped Grafana dashboard (config/) queries only
metrics the page exports."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from geode.metrics import names as n

ROOT = Path(__file__).resolve().parents[2]
INSTRUMENTED = [
    "geode.lanes.service",
    "geode.lanes.state",
    "geode.loop.call",
    "geode.loop.events",
    "geode.tools.timeline",
    "geode.records.engine",
    "geode.messengers.outbox",
    "geode.webhooks.counters",
    "geode.schedule.driver",
    "actors.tree.supervisor",
    "actors.tree.serve",
]
CALLS = """
r.turn_ended("control", "IPC", "natural", 1.0); r.model_call(0.1, "ok"); r.tool_call("x", True, "ok")
r.receipts_uncertain(1); r.child_started("store", 1); r.child_restarted("store"); r.child_exited(1)
r.lane_queue(2); r.admission_wait(0.1); r.messenger_post("telegram", "posted")
r.rate_limit_wait("slack", 1.0); r.provider_retry("anthropic"); r.provider_fallback("openai")
r.scheduler_lag(0.5); r.webhook_intake("accepted")
"""


def _run(code: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_metrics_off_never_imports_prometheus_client() -> None:
    code = "import sys\n" + "".join(f"import {m}\n" for m in INSTRUMENTED)
    code += "from geode.metrics import record as r\n" + CALLS
    code += "print(sorted(m for m in sys.modules if m.startswith('prometheus_client')))\n"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PROMETHEUS_MULTIPROC_DIR": "/nonexistent"}
    assert _run(code, env).strip() == "[]"


def test_the_instruments_register_the_listed_names(tmp_path: Path) -> None:
    code = "from geode.metrics import record as r\n" + CALLS
    code += (
        "from prometheus_client import CollectorRegistry, multiprocess\n"
        "reg = CollectorRegistry(); multiprocess.MultiProcessCollector(reg)\n"
        "print('\\n'.join(s.name for f in reg.collect() for s in f.samples))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "GEODE_METRICS_DIR": str(tmp_path)}
    exported = set(_run(code, env).split())
    listed = {v for k, v in vars(n).items() if k.isupper() and isinstance(v, str) and v.startswith("geode_")}
    families = {re.sub(r"_(bucket|count|sum)$", "", s) for s in exported}
    assert listed == families & listed and listed <= families, (listed - families, families - listed)


def test_every_dashboard_expression_names_an_exported_metric() -> None:
    dash = json.loads((ROOT / "config" / "grafana-dashboard.json").read_text())
    listed = {v for k, v in vars(n).items() if k.isupper() and isinstance(v, str) and v.startswith("geode_")}
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    used = set()
    for e in exprs:
        names = re.findall(r"\bgeode_[a-z_]+", e)
        assert names, e
        for name in names:
            base = re.sub(r"_(bucket|count|sum)$", "", name)
            assert base in listed, f"{e}: {name} is not on the page"
            used.add(base)
    for wanted in (n.TURNS, n.TURN_SECONDS, n.RESTARTS, n.UNCERTAIN, n.QUEUE_DEPTH):  # the five
        assert wanted in used, wanted


def test_run_bash_does_not_inherit_the_metrics_directory() -> None:
    """A command's own prometheus_client would write into the page's directory: the shell never gets it."""
    from geode.tools.builtin.bash_env import shell_env

    env = shell_env(
        {"PATH": "/bin", "PROMETHEUS_MULTIPROC_DIR": "/x", "GEODE_METRICS_DIR": "/x"}, home_root=""
    )
    assert env == {"PATH": "/bin"}
