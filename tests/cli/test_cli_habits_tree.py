"""The CLI against a served tree and the scripted model: `--continue` after a client SIGKILL mid-turn prints
that turn's answer, `geode -p` / `--version`, transcripts (hooks get an existing `transcript_path`,
`geode sessions` shows the first prompt), a bare `--resume` off a terminal lists sessions and exits 2."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from geode.home import GeodeHome
from geode.sessions.transcript import transcript_path
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, geode_popen, scripted_tree, wait_for
from tests.cli.scripted_chat import make_reply

HOOK = """
import json, os, sys
data = json.load(sys.stdin)
path = data.get("transcript_path")
found = {"path": path, "exists": bool(path) and os.path.isfile(path)}
if found["exists"]:
    found["text"] = open(path).read()
    found["mode"] = oct(os.stat(path).st_mode & 0o777)
with open(sys.argv[1], "a") as fh:
    fh.write(json.dumps(found) + "\\n")
print("{}")
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, ScriptedServer, Path]]:
    base = tmp_path_factory.mktemp("habits")
    ws = base / "ws"
    ws.mkdir()
    hook = base / "read_transcript.py"
    hook.write_text(HOOK)
    extra = (
        f'[[hooks.PreToolUse]]\nmatcher = "write_file"\n'
        f'command = "{sys.executable} {hook} {base / "hook_saw.jsonl"}"\n'
    )
    with scripted_tree(base, make_reply(ws), ws, extra=extra, cwd=ws) as (home, server):
        yield home, server, ws


def test_print_flag_and_version(tree: tuple[GeodeHome, ScriptedServer, Path]) -> None:
    home, _server, ws = tree
    r = geode(home, "-p", "hello there", cwd=ws, timeout=90)
    assert r.returncode == 0, r.stderr
    assert "echo: hello there" in r.stdout
    v = geode(home, "--version", cwd=ws)
    assert v.returncode == 0 and v.stdout.startswith("geode ")
    helped = geode(home, "--help", cwd=ws)
    assert "--print" in helped.stdout and "<bool>" not in helped.stdout


def test_a_transcript_reading_hook_gets_an_existing_path(
    tree: tuple[GeodeHome, ScriptedServer, Path],
) -> None:
    home, _server, ws = tree
    r = geode(home, "ask", "write hooked", "--json", "--dangerously-skip-permissions", cwd=ws, timeout=90)
    assert r.returncode == 0, r.stderr
    sid = json.loads(r.stdout)["session_id"]
    saw = [json.loads(x) for x in (ws.parent / "hook_saw.jsonl").read_text().splitlines()]
    assert saw and saw[-1]["exists"], saw
    assert saw[-1]["path"] == str(transcript_path(home.root, sid))
    assert saw[-1]["mode"] == "0o600"
    assert "write hooked" in saw[-1]["text"]  # the prompt was already in the transcript
    rows = [json.loads(x) for x in transcript_path(home.root, sid).read_text().splitlines()]
    assert [row["index"] for row in rows] == list(range(len(rows)))  # one line per message, in order
    assert rows[-1]["role"] == "assistant" and "done after" in json.dumps(rows[-1]["content"])
    listed = geode(home, "sessions", cwd=ws)
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith(sid))
    assert line.rstrip().endswith("write hooked")


def test_continue_after_a_client_sigkill_mid_turn_prints_that_turns_answer(
    tree: tuple[GeodeHome, ScriptedServer, Path],
) -> None:
    home, server, ws = tree
    before = len(server.requests)
    client = geode_popen(home, "ask", "slow kappa", cwd=ws)
    try:
        wait_for(lambda: len(server.requests) > before, 60, what="the turn never reached the model")
    finally:
        os.kill(client.pid, signal.SIGKILL)
        client.communicate(timeout=10)

    def finished() -> bool:  # the turn ends while no client is attached
        files = (home.root / "transcripts").glob("*.jsonl")
        return any("slow answer kappa" in f.read_text() for f in files)

    wait_for(finished, 60, what="the turn never finished")
    r = geode(home, "--continue", cwd=ws, input="exit\n", timeout=90)
    assert r.returncode == 0, r.stderr
    assert "slow answer kappa" in r.stdout, r.stdout
    assert "> slow kappa" in r.stdout  # the exchange: prompt and answer


def test_bare_resume_off_a_terminal_lists_sessions_and_exits_2(
    tree: tuple[GeodeHome, ScriptedServer, Path],
) -> None:
    home, _server, ws = tree
    assert geode(home, "-p", "listed one", cwd=ws, timeout=90).returncode == 0
    r = geode(home, "--resume", cwd=ws, input="", timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "listed one" in r.stdout and "ago" in r.stdout
    assert "geode --resume ID" in r.stderr
