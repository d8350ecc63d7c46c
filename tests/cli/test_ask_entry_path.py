"""`geode ask` as the console script runs it, against a fake control socket (tests/cli/fake_control.py), in a
fresh interpreter: what it imports, how often the client wakes after the turn's end, and that it ends without
the interpreter's teardown (issue 34: a CLI that starts in a blink, ≤ 30 ms from the last reply to its exit).
Counted, not timed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.tree.instance_lock import InstanceLock
from geode.home import GeodeHome
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol.envelope import Envelope
from tests.cli.fake_control import FakeControl, welcome

# Run as the `geode` console script does (actors.cli.main:entry). At exit (atexit) it reports the modules
# loaded and the client's socket reads after the turn_done event; a global's __del__ says the interpreter
# tore itself down.
_ASK = """
import atexit, json, sys
import actors.cli.client as client
import actors.cli.control_socket as sock

after_done = []
recv = sock.ControlSocket._recv
on_turn_event = client.ControlClient._on_turn_event

def counted_recv(self, timeout_s):
    if after_done:
        after_done[0] += 1
    return recv(self, timeout_s)

def noted(self, ev, *a, **k):
    out = on_turn_event(self, ev, *a, **k)
    if out is not None and not after_done:
        after_done.append(0)
    return out

sock.ControlSocket._recv = counted_recv
client.ControlClient._on_turn_event = noted

class TornDown:
    def __del__(self):
        sys.__stderr__.write("torn down\\n")

GLOBAL = TornDown()
report = lambda: {"modules": sorted(sys.modules), "wakes": after_done}
atexit.register(lambda: print(json.dumps(report()), file=sys.__stderr__))
sys.argv = ["geode", "ask", "hi"]
from actors.cli.main import entry
entry()
"""

HEAVY = (  # none of these is needed to send a prompt and print its answer
    "actors.bus",
    "actors.tree.client",
    "actors.tree.config_sections",
    "geode.config_schema",
    "geode.tools.approvals",
    "zmq.asyncio",
    "asyncio",
    # issue 34: the frames are validated by pydantic-core validators from stored schemas (actors/cli/wire.py),
    # no pydantic model class is created; `run_ask` lives outside the typer module; the version is read
    # from the distribution's METADATA without importlib.metadata
    "pydantic.",
    "typer",
    "click",
    "geode.protocol.envelope",
    "geode.protocol.codec",
    "geode.protocol.control",
    "geode.protocol.lanes",
    "geode.protocol.catalog",
    "importlib.metadata",
    "actors.cli.chat_cmds",
    "actors.cli.trust_cmds",
    # no project MCP file from the cwd up, the config byte for byte the running tree's last good copy:
    # neither the trust module nor the config reader (tomllib, logging) is needed
    "geode.tools.mcp.trust",
    "geode.config_file",
    "tomllib",
    "logging",
    "shutil",  # the terminal's width: only for an approval's request (and argparse's help, never shown)
)
# Issue 34, the interpreter's part: the home as strings (geode/home_paths.py), no pathlib (with urllib.parse,
# ipaddress, fnmatch); no dataclasses (GeodeHome), hashlib (the run directory of a long home), argparse
# (with gettext, locale: the options are hand-parsed)
NOT_LOADED = {
    "pathlib",
    "geode.home",
    "urllib.parse",
    "ipaddress",
    "fnmatch",
    "dataclasses",
    "copy",
    "hashlib",
}
NOT_LOADED |= {"argparse", "gettext", "locale"}
# issue 34 session 7: pydantic-core's compiled module alone (actors/cli/schema_core.py), not its package's
# __init__ (core_schema, typing_extensions: ~30 ms of the way from the handshake to the prompt)
NOT_LOADED |= {"pydantic_core.core_schema", "typing_extensions"}
# modules at exit, all and ours (geode.*, actors.*), measured at round 3; since: +1 of ours for
# actors.cli.interrupt_latch (a Ctrl-C anywhere in the follow loop cancels the turn and still gives the
# outcome), +1 for actors.cli.schema_core and 15 fewer in all (pydantic-core's package init: 161 -> 146)
ASK_ALL, ASK_OURS = 146, 31
# CPython 3.12 (the project's interpreter since issue 34 session 10): pyzmq's wheel for 3.12 is a limited-API
# (abi3) build whose Cython module init imports inspect (with ast, dis, opcode, tokenize, token, linecache):
# 156 modules, none of them ours
if sys.version_info >= (3, 12):
    ASK_ALL = 156
ROOT = Path(__file__).resolve().parents[2]
# No site (-S): the modules counted are the ask path's own, whatever the venv's .pth files load at the
# interpreter's start (that start is tests/cli/test_interpreter_start.py's); the paths site would add.
_PATHS = (
    f"import sys\nsys.path[:0] = [{str(ROOT)!r}]\nsys.path.append({sysconfig.get_paths()['purelib']!r})\n"
)


@pytest.fixture
def served_home(tmp_path: Path) -> Iterator[GeodeHome]:
    """A home that looks served (its instance lock held) whose control socket runs a one-event turn."""
    home = GeodeHome(tmp_path / "gh").ensure()

    def answer(env: Envelope, ident: bytes) -> dict[str, Any] | None:
        if env.type == c.HANDSHAKE:
            return welcome()
        if env.type == c.PROMPT:
            turn = str(env.body["turn_id"])
            fc.send(ident, env.reply_ok({"turn_id": turn, "session_id": "s-1", "state": "accepted"}))
            result = {"text": "the answer", "termination_reason": "natural"}
            done = {"session_id": "s-1", "turn_id": turn, "seq": 1, "kind": lanes_msg.TURN_DONE}
            fc.send(ident, Envelope(kind="cast", type=c.CLI_EVENT, body={**done, "data": {"result": result}}))
            return None
        return {"ok": True}

    lock = InstanceLock(home.lock_file)
    assert lock.acquire()
    try:
        with FakeControl(home, answer=answer) as fc:
            yield home
    finally:
        lock.release()


def test_ask_imports_only_what_it_uses_wakes_once_after_the_turn_and_skips_teardown(
    served_home: GeodeHome, tmp_path: Path
) -> None:
    env = {**os.environ, "GEODE_HOME": str(served_home.root)}
    out = subprocess.run(
        [sys.executable, "-S", "-c", _PATHS + _ASK],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "the answer"
    lines = out.stderr.strip().splitlines()
    report = json.loads(next(line for line in lines if line.startswith("{")))
    loaded = [m for m in report["modules"] if m.startswith(HEAVY) or m == "pydantic" or m in NOT_LOADED]
    assert loaded == [], f"geode ask imported {loaded}"
    # and no more of them than at issue 34's round 3 (-S: the interpreter's own, this script's and the path's)
    ours = [m for m in report["modules"] if m.split(".")[0] in ("geode", "actors")]
    assert len(ours) <= ASK_OURS, f"geode ask imports {len(ours)} of our modules: {ours}"
    assert len(report["modules"]) <= ASK_ALL, f"geode ask imports {len(report['modules'])} modules"
    # after turn_done: one read, the reply to cli.exit (no poll timeout waited out, no ping round)
    assert report["wakes"] == [1], report["wakes"]
    # atexit ran (the report above), the interpreter's teardown did not (~25 ms of freeing modules)
    assert "torn down" not in lines, out.stderr
