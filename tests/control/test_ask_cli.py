"""`geode ask` as a real subprocess against a running daemon: exit codes, --json, approvals without a tty."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.control.procs import Procs
from tests.waiting import poll_for


@pytest.fixture(scope="module")
def procs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Procs]:
    p = Procs(tmp_path_factory.mktemp("ask")).up("loop-1")
    yield p
    p.close()


def test_ask_json_success(procs: Procs) -> None:
    r = procs.geode("ask", "hello", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["text"] == "answer to hello" and out["termination_reason"] == "natural"
    assert out["session_id"].startswith("s-") and out["tool_calls"] == [] and out["exit_code"] == 0


def test_ask_plain_text_and_failure_exit_code(procs: Procs) -> None:
    ok = procs.geode("ask", "hi")
    assert ok.returncode == 0 and "answer to hi" in ok.stdout
    bad = procs.geode("ask", "fail:model_refusal")
    assert bad.returncode == 1 and "model_refusal" in bad.stderr


def test_ask_without_terminal_denies_approvals_unless_skipped(procs: Procs) -> None:
    # the scripted worker saves no checkpoint: `--json` lists the calls of the turn's durable record (none
    # here; tests/cli/test_ask_json_record_tree.py checks a denied call's error on a real tree)
    denied = json.loads(procs.geode("ask", "approve:write_file", "--json").stdout)
    assert denied["tool_calls"] == [] and denied["tool_call_count"] == 0
    allowed = json.loads(
        procs.geode("ask", "approve:write_file", "--json", "--dangerously-skip-permissions").stdout
    )
    assert allowed["exit_code"] == 0
    tools = [ln for ln in procs.effect_lines() if ln.startswith("tool write_file")]
    assert len(tools) == 1


def test_ask_resume_of_a_session_the_store_does_not_have(procs: Procs) -> None:
    first = json.loads(procs.geode("ask", "hello", "--json").stdout)  # scripted worker: no checkpoint
    again = procs.geode("ask", "again", "--json", "--resume", first["session_id"])
    assert again.returncode == 2 and "cannot resume" in again.stderr


def test_ask_unreachable_daemon_exit_code(tmp_path: Path) -> None:
    p = Procs(tmp_path)
    p.home.config_file.write_text("this is [not toml")  # the daemon cannot start: a broken config
    try:
        r = p.geode("ask", "hello", timeout=90)
        assert r.returncode == 3 and "daemon unavailable" in r.stderr
    finally:
        p.close()


def test_ctrl_c_cancels_the_running_turn(procs: Procs) -> None:
    import signal
    import subprocess
    import sys

    from tests.control.procs import ROOT

    p = subprocess.Popen(
        [sys.executable, "-m", "actors.cli.main", "ask", "slow", "--json"],
        env=procs.env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = lambda: any(ln.startswith("first-effect") for ln in procs.effect_lines()[-3:])  # noqa: E731
    poll_for(first, 20, interval_s=0.05, what="the first effect")
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert json.loads(out)["termination_reason"] == "user_cancelled"
