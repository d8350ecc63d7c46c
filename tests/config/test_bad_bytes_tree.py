"""Bad bytes against a served tree (issue 26, breach 9 and the invalid-UTF-8 hole): a config.toml broken
while the daemon runs (a non-UTF-8 byte, bad TOML, a wrong type) leaves `geode status`, `restart` and
`stop` working and new `geode ask` turns served on the last good config, each saying what is wrong in one
line; with no daemon, `geode ask` refuses in one line. A prompt that is not UTF-8, a model's tool argument
with a lone surrogate and a workspace file whose name is not UTF-8 are a clear error or an escape."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import children, env, geode, scripted_tree, tool_results, wait_children, wait_for
from tests.cli.scripted_chat import make_reply

BAD_NAME = b"odd\xffname.txt"  # a workspace file whose name is not UTF-8
BROKEN = {  # how config.toml gets broken, and what the one line must name
    "not_utf8": (lambda good: good + b"# caf\xe9 au lait\n", "not UTF-8 (0xe9)"),
    "syntax": (lambda good: good + b"[loop\nworkers = 3\n", "invalid TOML"),
    "wrong_type": (lambda good: good.replace(b"workers = 2", b'workers = "two"'), "[loop] workers"),
}


def _reply(ws: Path):  # type: ignore[no-untyped-def]
    inner = make_reply(ws)

    def reply(req: Any) -> Any:
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        last = json.dumps(msgs[-1]) if msgs else ""
        if "tool_result" in last:
            return inner(req)
        if "surrogate" in last:  # a model proposing a path that is not valid Unicode
            return {"tool_calls": [{"name": "read_file", "input": {"file_path": "\ud800"}}]}
        if "globit" in last:
            return {"tool_calls": [{"name": "glob_files", "input": {"pattern": "*.txt"}}]}
        return inner(req)

    return reply


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, ScriptedServer, Path]]:
    base = tmp_path_factory.mktemp("badbytes")
    ws = base / "ws"
    ws.mkdir()
    with scripted_tree(base, _reply(ws), ws, cwd=ws) as (home, server):
        yield home, server, ws


def _one_line_naming(stderr: str, home: GeodeHome, what: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [ln for ln in stderr.splitlines() if str(home.config_file) in ln]
    assert len(lines) == 1 and what in lines[0], stderr
    return lines[0]


@pytest.mark.parametrize("kind", list(BROKEN))
def test_a_config_broken_while_serving_leaves_the_tree_usable(
    tree: tuple[GeodeHome, ScriptedServer, Path], kind: str
) -> None:
    home, _server, ws = tree
    good = home.config_file.read_bytes()
    breaks, what = BROKEN[kind]
    home.config_file.write_bytes(breaks(good))
    try:
        st = geode(home, "status", "--json", cwd=ws)
        assert st.returncode == 0, st.stderr
        line = _one_line_naming(st.stderr, home, what)
        if kind == "not_utf8":
            at = good.count(b"\n") + 1
            assert f"line {at}, byte {len(good) + 5}" in line, line  # the é's line and offset
        elif kind == "syntax":
            assert "(at line" in line and "column" in line, line
        if kind != "syntax":  # a restarted child starts on the tree's validated copy, not the saved file
            inc = children(home)["loop-1"].incarnation
            r = geode(home, "restart", "loop-1", cwd=ws)
            assert r.returncode == 0, r.stderr
            _one_line_naming(r.stderr, home, what)
            wait_children(  # the restarted child starts on the last good config
                home, lambda k: k["loop-1"].incarnation > inc and k["loop-1"].state == "running", 60
            )
        a = geode(home, "ask", f"hello {kind}", cwd=ws, timeout=90)
        assert a.returncode == 0 and f"echo: hello {kind}" in a.stdout, a.stderr
        _one_line_naming(a.stderr, home, what)
        reload = geode(home, "reload", cwd=ws)
        assert reload.returncode == 78 and what in reload.stderr and "Traceback" not in reload.stderr
        if kind == "not_utf8":
            doctor = geode(home, "doctor", cwd=ws)
            assert any(ln.startswith("✗ config") and what in ln for ln in doctor.stdout.splitlines()), doctor
            assert "Traceback" not in doctor.stderr + doctor.stdout
        # the children never read the saved file: they serve on the tree's validated copy, restarted or not
        logs = "".join(p.read_text(errors="replace") for p in home.logs_dir.glob("*.log"))
        assert "Traceback" not in logs
    finally:
        home.config_file.write_bytes(good)


def test_a_prompt_that_is_not_utf8_is_refused_in_one_line(
    tree: tuple[GeodeHome, ScriptedServer, Path],
) -> None:
    home, server, ws = tree
    before = len(server.requests)
    r = geode(home, "ask", os.fsdecode(b"hello \xff there"), cwd=ws)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == "geode: the prompt is not UTF-8 text (byte 6: 0xff); nothing was sent"
    assert len(server.requests) == before
    chat = subprocess.run(  # the chat off a terminal: the bad line is refused, the next one is answered
        [sys.executable, "-m", "actors.cli.main"],
        input=b"bad \xfe line\nsecond line\nexit\n",
        env=env(home),
        cwd=ws,
        capture_output=True,
        timeout=90,
    )
    out, err = chat.stdout.decode(), chat.stderr.decode()
    assert chat.returncode == 0 and "Traceback" not in err, err
    assert "geode: that line is not UTF-8 text (byte 4: 0xfe); nothing was sent" in err
    assert "echo: second line" in out and len(server.requests) == before + 1  # only the good line was sent


def test_a_lone_surrogate_tool_argument_is_invalid_input_and_the_turn_completes(
    tree: tuple[GeodeHome, ScriptedServer, Path],
) -> None:
    home, server, ws = tree
    r = geode(home, "ask", "surrogate please", "--dangerously-skip-permissions", cwd=ws, timeout=90)
    assert r.returncode == 0, r.stderr
    assert "done after" in r.stdout
    (result,) = tool_results(server, "surrogate please")
    assert '\\"error_type\\": \\"invalid_tool_input\\"' in result and "file_path" in result, result


def test_a_file_name_that_is_not_utf8_is_listed_escaped(tree: tuple[GeodeHome, ScriptedServer, Path]) -> None:
    home, server, ws = tree
    with open(os.path.join(os.fsencode(ws), BAD_NAME), "wb") as f:
        f.write(b"x\n")
    (ws / "plain.txt").write_text("y\n")
    before = {name: c.incarnation for name, c in children(home).items()}
    r = geode(home, "ask", "globit now", "--dangerously-skip-permissions", cwd=ws, timeout=90)
    assert r.returncode == 0, r.stderr
    (result,) = tool_results(server, "globit now")
    assert "odd\\\\\\\\xffname.txt" in result and "plain.txt" in result, result  # the byte, escaped
    after = {name: c.incarnation for name, c in children(home).items()}
    assert after == before  # no actor died on it


def test_stop_works_with_a_broken_config(tree: tuple[GeodeHome, ScriptedServer, Path]) -> None:
    home, _server, ws = tree
    home.config_file.write_bytes(home.config_file.read_bytes() + b"\xff\n")
    r = geode(home, "stop", cwd=ws)
    assert r.returncode == 0 and "geode stopped" in r.stdout, r.stderr
    _one_line_naming(r.stderr, home, "not UTF-8 (0xff)")
    wait_for(lambda: not home.cli_socket.exists(), 30, what="the socket to go")


def test_with_no_daemon_ask_refuses_in_one_line_and_status_works(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "gh").ensure()
    home.config_file.write_bytes(b"[loop]\nworkers = 2\n# caf\xe9\n")
    a = geode(home, "ask", "x", cwd=tmp_path, timeout=90)
    assert a.returncode != 0
    _one_line_naming(a.stderr, home, "line 3, byte 24: not UTF-8 (0xe9)")
    r = geode(home, "status", cwd=tmp_path)
    assert "geode is not running" in r.stdout, r
    _one_line_naming(r.stderr, home, "line 3, byte 24")
