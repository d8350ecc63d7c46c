"""The /metrics page of a served tree (issue 33 item 2): it parses with prometheus_client's own parser; after
10 turns whose outcomes the test arranged (8 plain natural, 1 with a tool call, 1 with a denied tool, 1
provider failure among them) the turn and tool-call counters equal those outcomes, cross-checked against the
turn records and the timeline's tool rows; a SIGKILLed child moves the restart counter and no counter goes
backwards; the bearer token is required; a port in use refuses the start in one line."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.metrics import names as n
from geode.records.reader import RecordReader
from geode.records.turns import TurnStore
from geode.testing.scenario import RecordedRequest, ScriptedError, ScriptedReply
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import (
    env,
    geode,
    geode_popen,
    make_home,
    scripted_home,
    serve,
    stop,
    wait_children,
)
from tests.metrics.metrics_kit import TOKEN, counters, fetch, fetch_post, free_port, samples, total
from tests.waiting import poll_for

Tree = tuple[Any, ScriptedServer, str, Path, str]
ROUTE = """[[webhooks.routes]]
name = "gh"
path = "/hooks/gh"
auth = "github"
secrets = ["GH_SECRET"]
prompt = "p"
"""


def _reply(ws: Path):  # type: ignore[no-untyped-def]
    overloaded: list[str] = []

    def reply(req: RecordedRequest) -> Any:
        msgs = req.body["messages"]
        first, last = json.dumps(msgs[0]), msgs[-1]
        if "overloaded once" in first and not overloaded:  # the adapter retries it (base delay 10 ms)
            overloaded.append(first)
            return ScriptedReply(error=ScriptedError(status=529, message="scripted: overloaded"))
        if isinstance(last.get("content"), list) and any(
            b.get("type") == "tool_result" for b in last["content"]
        ):
            return {"text": "finished"}
        if "provider breaks" in first:
            return ScriptedReply(error=ScriptedError(status=400, message="scripted: invalid request"))
        if "read the notes" in first:
            return {
                "tool_calls": [{"name": "read_file", "id": "tu_r", "input": {"file_path": str(ws / "n.txt")}}]
            }
        if "write the notes" in first:  # no terminal: `geode ask` denies the approval
            call = {
                "name": "write_file",
                "id": "tu_w",
                "input": {"file_path": str(ws / "w.txt"), "content": "W"},
            }
            return {"tool_calls": [call]}
        if "run the slow command" in first:  # the executor is SIGKILLed while it runs: uncertain
            cmd = f"touch {ws / 'started'}; sleep 5"
            return {"tool_calls": [{"name": "run_bash", "id": "tu_b", "input": {"command": cmd}}]}
        return {"text": "plain answer"}

    return reply


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    base = tmp_path_factory.mktemp("metrics")
    ws = base / "ws"
    ws.mkdir()
    (ws / "n.txt").write_text("the notes\n")
    port, hook_port = free_port(), free_port()
    server = ScriptedServer(_reply(ws)).start()
    try:
        extra = f'[metrics]\nlisten = "127.0.0.1:{port}"\ntoken_env = "METRICS_TOKEN"\n'
        extra += "[providers.retry]\nbase_delay_s = 0.01\n"
        extra += f'[webhooks]\nlisten = "127.0.0.1:{hook_port}"\n{ROUTE}'
        home = scripted_home(base, server, ws, extra)
        home.env_file.write_text(f"ANTHROPIC_API_KEY=sk-test-key\nMETRICS_TOKEN={TOKEN}\nGH_SECRET=s\n")
        try:
            serve(home, cwd=ws)
            yield home, server, f"http://127.0.0.1:{port}/metrics", ws, f"http://127.0.0.1:{hook_port}"
        finally:
            stop(home)
    finally:
        server.stop()


def _page(url: str) -> dict[tuple[str, Any], float]:
    code, text = fetch(url)
    assert code == 200, text
    return samples(text)


def _page_when(url: str, ok: Any) -> dict[tuple[str, Any], float]:
    def ready() -> dict[tuple[str, Any], float]:
        page = _page(url)
        return page if ok(page) else {}  # empty: not yet

    return poll_for(ready, 30, what="the metrics page to show it")


def test_turn_and_tool_counters_equal_the_arranged_outcomes(tree: Tree) -> None:
    home, _server, url, ws, _hooks = tree
    prompts = [f"plain {i}" for i in range(7)] + ["read the notes", "write the notes", "provider breaks"]
    results = []
    for p in prompts:
        r = geode(home, "ask", p, "--json", cwd=ws)
        results.append(json.loads(r.stdout))
    reasons = [r["termination_reason"] for r in results]
    assert reasons[:9] == ["natural"] * 9 and reasons[9] != "natural", reasons
    assert not (ws / "w.txt").exists()  # denied, never run

    page = _page_when(url, lambda p: total(p, n.TURNS) >= 10 and total(p, n.TOOL_CALLS) >= 2)
    assert total(page, n.TURNS, entry="cli", termination="natural") == 9
    assert total(page, n.TURNS, entry="cli", termination=reasons[9]) == 1
    assert total(page, n.TURNS) == 10
    assert total(page, f"{n.TURN_SECONDS}_count", entry="cli") == 10
    assert total(page, n.TOOL_CALLS, tool="read_file", outcome="ok") == 1
    assert total(page, n.TOOL_CALLS, tool="write_file", outcome="denied") == 1
    assert total(page, n.TOOL_CALLS) == 2
    assert total(page, f"{n.MODEL_SECONDS}_count", outcome="ok") == 11  # 7 + 2x2 (a call, then "finished")
    assert total(page, f"{n.MODEL_SECONDS}_count", outcome="error") == 1
    assert total(page, f"{n.ADMISSION_WAIT}_count") == 10
    # the same figures from the durable records: each turn's record and the timeline's tool rows
    sessions = [r["session_id"] for r in results]
    with RecordReader.for_home(home) as reader:
        turns = TurnStore(reader.renv, None).list()  # type: ignore[arg-type]  # read-only: no writer needed
        ended = [t for t in turns if t.session_id in sessions]
        by_reason: dict[str, int] = {}
        for t in ended:
            reason = (t.outcome or {}).get("termination_reason", "")
            by_reason[reason] = by_reason.get(reason, 0) + 1
        rows = [row.event for s in sessions for row in reader.timeline(s)]
    for (name, labels), value in page.items():
        if name == n.TURNS:
            assert by_reason.get(dict(labels)["termination"], 0) == value, (labels, by_reason)
    outcomes = {"tool.completed": "ok", "tool.denied": "denied"}
    tool_rows = sorted((e.payload["tool_name"], outcomes[e.kind]) for e in rows if e.kind in outcomes)
    assert tool_rows == [("read_file", "ok"), ("write_file", "denied")]
    assert "tu_" not in json.dumps([k for k in page]) and not any("s-" in v for k in page for _, v in k[1])


def test_a_provider_retry_is_counted(tree: Tree) -> None:
    home, _server, url, ws, _hooks = tree
    before = total(_page(url), n.RETRIES, provider="anthropic")
    r = geode(home, "ask", "overloaded once", "--json", cwd=ws)
    assert json.loads(r.stdout)["termination_reason"] == "natural", r.stderr
    page = _page_when(url, lambda p: total(p, n.RETRIES, provider="anthropic") > before)
    assert total(page, n.RETRIES, provider="anthropic") == before + 1


def test_a_killed_child_moves_the_restart_counter_and_no_counter_goes_back(tree: Tree) -> None:
    """The executor is SIGKILLed while a run_bash call runs: its restart is counted, its receipt turns
    uncertain (the gauge says 1, as the store does), and no counter of the dead process goes back."""
    home, _server, url, ws, _hooks = tree
    assert geode(home, "ask", "read the notes", "--json", cwd=ws).returncode == 0
    before = counters(_page_when(url, lambda p: total(p, n.TOOL_CALLS) >= 1))
    assert total(_page(url), n.UNCERTAIN) == 0
    victim = wait_children(home, lambda k: k["executor"].state == "running")["executor"]
    restarts = total(samples(fetch(url)[1]), n.RESTARTS, child="executor")
    ask = geode_popen(home, "ask", "run the slow command", "--json", "--dangerously-skip-permissions", cwd=ws)
    try:
        poll_for(lambda: (ws / "started").exists(), 30, what="the slow command to start")
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        out, err = ask.communicate(timeout=60)
    finally:
        if ask.poll() is None:
            ask.kill()
            ask.communicate()
    assert json.loads(out)["termination_reason"], err
    wait_children(home, lambda k: k["executor"].pid != victim.pid and k["executor"].state == "running", 30)
    after_page = _page_when(
        url, lambda p: total(p, n.RESTARTS, child="executor") > restarts and total(p, n.UNCERTAIN) >= 1
    )
    listed = geode(home, "receipts", "--uncertain", "--json", cwd=ws)  # what the operator is told
    assert total(after_page, n.UNCERTAIN) == len(json.loads(listed.stdout)) == 1, listed.stderr
    after = counters(after_page)
    assert total(after_page, n.RESTARTS, child="executor") == restarts + 1
    went_back = {k: (v, after.get(k)) for k, v in before.items() if after.get(k, -1) < v}
    assert not went_back, went_back  # the dead executor's tool counts stay in the sum
    assert total(after_page, n.TOOL_CALLS, tool="read_file", outcome="ok") >= 1
    incarnations = {dict(ls)["child"]: v for (nm, ls), v in after_page.items() if nm == n.INCARNATION}
    assert incarnations["executor"] == wait_children(home, lambda k: True)["executor"].incarnation


def test_geode_top_shows_the_page_figures(tree: Tree) -> None:
    home, _server, url, ws, _hooks = tree
    page = _page(url)
    r = geode(home, "top", "--json", cwd=ws)
    assert r.returncode == 0, r.stderr
    f = json.loads(r.stdout)
    assert f["turns"]["total"] == total(page, n.TURNS) >= 10
    assert f["turns"]["by_termination"]["natural"] == total(page, n.TURNS, termination="natural")
    assert (
        f["tool_calls"]["by_outcome"]["denied"] == 1
        and f["receipts_uncertain"] == total(page, n.UNCERTAIN) == 1
    )
    assert f["children"]["restarts"]["executor"] >= 1 and f["turns"]["latency_p95_s"] is not None
    once = geode(home, "top", "--once", cwd=ws)
    assert once.returncode == 0, once.stderr
    assert "turns" in once.stdout and "receipts uncertain" in once.stdout and "executor" in once.stdout


def test_webhook_intakes_are_counted_by_outcome(tree: Tree) -> None:
    home, _server, url, ws, hooks = tree
    before = _page(url)
    bad = {"X-GitHub-Delivery": "d-1", "X-Hub-Signature-256": "sha256=" + "0" * 64}
    assert fetch_post(f"{hooks}/hooks/gh", b"{}", bad) == 401  # a wrong signature: rejected
    assert fetch_post(f"{hooks}/hooks/none", b"{}", {}) == 404  # no such route: unrouted
    page = _page_when(url, lambda p: total(p, n.INTAKES) >= total(before, n.INTAKES) + 2)
    for outcome in ("rejected", "unrouted"):
        assert total(page, n.INTAKES, outcome=outcome) == total(before, n.INTAKES, outcome=outcome) + 1
    detail = json.loads(geode(home, "webhooks", "--json", cwd=ws).stdout)  # the child's own counters agree
    assert sum(detail["routes"][0]["counters"]["rejected"].values()) == total(
        page, n.INTAKES, outcome="rejected"
    )


def test_the_bearer_token_is_required(tree: Tree) -> None:
    _home, _server, url, _ws, _hooks = tree
    assert fetch(url, token=None)[0] == 401
    assert fetch(url, token="wrong")[0] == 401
    assert fetch(url.replace("/metrics", "/other"))[0] == 404
    code, text = fetch(url)
    assert code == 200 and n.UNCERTAIN in text


def test_a_metrics_port_in_use_is_a_clear_error_at_start(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        home = make_home(tmp_path, f'[metrics]\nlisten = "127.0.0.1:{port}"\n')
        r = geode(home, "serve", "--foreground", timeout=60)
    assert r.returncode == 78, r.stderr
    lines = r.stderr.strip().splitlines()
    assert (
        lines[0] == f"geode serve: [metrics] listen = '127.0.0.1:{port}': the port is in use; choose another"
    )
    assert "Traceback" not in r.stderr and not (home.run_dir / "metrics").exists()


def test_metrics_off_a_served_tree_records_nothing(tmp_path: Path) -> None:
    """Off: no child has a multiprocess directory (not even one inherited from the operator's shell), none
    writes a file there, and the home has no metrics directory, after a turn with a tool call."""
    stray = tmp_path / "stray"
    stray.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "n.txt").write_text("the notes\n")
    server = ScriptedServer(_reply(ws)).start()
    try:
        home = scripted_home(tmp_path, server, ws)
        shell = {**env(home), "PROMETHEUS_MULTIPROC_DIR": str(stray), "GEODE_METRICS_DIR": str(stray)}
        r = subprocess.run(
            [sys.executable, "-m", "actors.cli.main", "serve"],
            env=shell,
            cwd=ws,
            capture_output=True,
            timeout=90,
        )
        assert r.returncode == 0, r.stderr
        try:
            out = geode(home, "ask", "read the notes", "--json", cwd=ws)
            assert json.loads(out.stdout)["termination_reason"] == "natural", out.stderr
            kids = wait_children(home, lambda k: all(c.pid for c in k.values()))
            for name, child in kids.items():
                environ = Path(f"/proc/{child.pid}/environ").read_bytes().split(b"\0")
                assert not [v for v in environ if b"METRICS" in v or b"PROMETHEUS" in v], name
            off = geode(home, "top", "--once", cwd=ws)
            assert off.returncode == 2 and "metrics are off" in off.stderr, off.stderr
        finally:
            stop(home)
    finally:
        server.stop()
    assert list(stray.iterdir()) == [] and not (home.run_dir / "metrics").exists()
