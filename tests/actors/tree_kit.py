"""Start a real `geode serve` tree in a temporary GEODE_HOME for the integration tests (plain or with the
scripted provider), run the CLI against it, and poll its state with timeouts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from actors.tree.client import stop_tree, tree_status
from geode.home import GeodeHome
from geode.protocol.runtime import ChildInfo
from geode.testing.scripted import ScriptedServer
from tests.waiting import poll_for

ROOT = Path(__file__).resolve().parents[2]
FAST_CONFIG = """
[supervisor]
backoff_base_s = 0.05
backoff_max_s = 0.2
stable_s = 1.0
[loop]
workers = 2
"""


def make_home(base: Path, extra: str = "") -> GeodeHome:
    home = GeodeHome(base / "gh").ensure()
    home.config_file.write_text(FAST_CONFIG + extra)
    return home


def env(home: GeodeHome) -> dict[str, str]:
    """The environment of a CLI process run against ``home``."""
    return {**os.environ, "GEODE_HOME": str(home.root), "PYTHONPATH": str(ROOT)}


def geode(
    home: GeodeHome,
    *args: str,
    timeout: float = 60,
    cwd: Path = ROOT,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actors.cli.main", *args],
        env=env(home),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
    )


def geode_popen(home: GeodeHome, *args: str, cwd: Path = ROOT, **kw: Any) -> subprocess.Popen[str]:
    """Start the CLI without waiting (stdout/stderr piped as text unless ``kw`` says otherwise)."""
    opts: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **kw}
    return subprocess.Popen([sys.executable, "-m", "actors.cli.main", *args], env=env(home), cwd=cwd, **opts)


def serve(home: GeodeHome, timeout: float = 90, cwd: Path = ROOT, *, settle: bool = True) -> None:
    """`geode serve` (daemonised); returns once the tree is up and (``settle``) its loop workers swapped."""
    r = geode(home, "serve", timeout=timeout, cwd=cwd)
    assert r.returncode == 0, r.stdout + r.stderr
    if settle:
        settled(home, timeout)


def settled(home: GeodeHome, timeout: float = 90) -> dict[str, ChildInfo]:
    """No loop worker left to swap: `geode serve` is ready before the zygote has imported the provider SDKs
    and then swaps each loop worker for a fork that carries them (actors/tree/swaps.py); a test that kills,
    counts or restarts children starts from the settled tree."""

    def done(kids: dict[str, ChildInfo]) -> bool:
        return not any(c.swap for c in kids.values())

    return wait_children(home, done, timeout)


def status_children(home: GeodeHome, timeout: float = 30) -> dict[str, dict[str, Any]]:
    """The children as `geode status --json` reports them, by name."""
    r = geode(home, "status", "--json", timeout=timeout)
    assert r.returncode == 0, r.stderr
    return {ch["name"]: ch for ch in json.loads(r.stdout)["children"]}


def scripted_home(base: Path, server: ScriptedServer, ws: Path | None = None, extra: str = "") -> GeodeHome:
    """A home whose anthropic provider is ``server`` (tools rooted at ``ws`` if given), with a test key."""
    cfg = f"""
[providers]
model = "claude-sonnet-5"
[providers.anthropic]
base_url = "{server.base_url}"
"""
    if ws is not None:
        cfg += f'[tools]\nroots = ["{ws}"]\n'
    home = make_home(base, cfg + extra)
    home.env_file.write_text("ANTHROPIC_API_KEY=sk-test-key\n")
    return home


@contextmanager
def scripted_tree(
    base: Path,
    reply: Callable[[Any], Any],
    ws: Path | None = None,
    extra: str = "",
    cwd: Path = ROOT,
    *,
    settle: bool = True,
) -> Iterator[tuple[GeodeHome, ScriptedServer]]:
    """A served tree (started from ``cwd``) whose provider is a ScriptedServer answering with ``reply``
    (``settle``: see :func:`serve`); stopped on exit."""
    server = ScriptedServer(reply).start()
    try:
        home = scripted_home(base, server, ws, extra)
        try:
            serve(home, cwd=cwd, settle=settle)
            yield home, server
        finally:
            stop(home)
    finally:
        server.stop()


wait_for = poll_for  # the suite's one polling wait (tests/waiting.py), under the name the tree tests use


def children(home: GeodeHome) -> dict[str, ChildInfo]:
    st = tree_status(home)
    assert st is not None, "tree not running"
    return {c.name: c for c in st.children}


def wait_children(home: GeodeHome, pred, timeout_s: float = 15.0) -> dict[str, ChildInfo]:  # type: ignore[no-untyped-def]
    def reached() -> dict[str, ChildInfo] | None:
        kids = children(home)
        return kids if pred(kids) else None

    return poll_for(
        reached,
        timeout_s,
        interval_s=0.05,
        what="the tree's children to reach the expected state",
        swallow=(Exception,),  # the tree is (re)starting: status not answering yet
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def stop(home: GeodeHome) -> None:
    stop_tree(home, timeout_s=20)


def tool_results(model: ScriptedServer, marker: str) -> list[str]:
    """The tool_result blocks (JSON text) the model got in the conversation whose prompt has ``marker``."""
    found = []
    for r in model.requests:
        msgs = r.body.get("messages", []) if isinstance(r.body, dict) else []
        if not msgs or marker not in json.dumps(msgs[0]):
            continue
        for m in msgs:
            blocks = m.get("content") if isinstance(m.get("content"), list) else []
            found += [json.dumps(b) for b in blocks if b.get("type") == "tool_result"]
    return found
