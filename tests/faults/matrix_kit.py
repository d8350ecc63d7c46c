"""One fault-matrix cell on a real tree: serve with GEODE_FAULTS armed for one point in one child, run a turn
whose only tool call appends a marker to a file, watch the child come back, and observe what DESIGN.md §5
promises (effect count, receipt state, `geode receipts --uncertain`, `geode reconcile`, a next turn)."""

from __future__ import annotations

import fnmatch
import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from geode.faults import marker
from geode.home import GeodeHome
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_home, serve, stop, wait_children

ALLOW_ALL = """
[[hooks.PermissionRequest]]
command = '''echo '{"hookSpecificOutput": {"permissionDecision": "allow"}}' '''
"""


def _text(content: Any) -> str:
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [])


def effect_reply(effects: Path):  # type: ignore[no-untyped-def]
    """The model: "effect NAME" → run_bash appending NAME to ``effects``; after the result: a text."""

    def reply(req: Any) -> Any:
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        content = msgs[-1].get("content") if msgs else ""
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            return {"text": "effect done"}
        name = _text(content).split()[-1]
        return {"tool_calls": [{"name": "run_bash", "input": {"command": f"echo {name} >> {effects}"}}]}

    return reply


@dataclass
class Seen:
    """What one cell observed (asserted by the matrix test)."""

    first: dict[str, Any] = field(default_factory=dict)  # `geode ask --json` of the faulted turn
    first_rc: int = -1
    effects_first: int = 0
    receipts: list[dict[str, Any]] = field(default_factory=list)  # of the session, after the restart
    uncertain_listed: list[str] = field(default_factory=list)  # `geode receipts --uncertain` op ids
    status_before: str = ""  # the session's status after the faulted turn
    reconcile_rc: int | None = None
    reconcile_out: str = ""
    listed_after: list[str] = field(default_factory=list)  # `geode receipts --uncertain` after reconcile
    second: dict[str, Any] = field(default_factory=dict)
    second_rc: int = -1
    effects_second: int = 0
    took: dict[str, float] = field(default_factory=dict)  # seconds: the faulted turn, the restart wait


@contextmanager
def one_worker_tree(base: Path, reply: Any, ws: Path) -> Iterator[GeodeHome]:
    """A served scripted tree (tools allowed, started from ``ws``) with one loop worker: fewer processes."""
    server = ScriptedServer(reply).start()
    try:
        home = scripted_home(base, server, ws, ALLOW_ALL)
        cfg = home.config_file.read_text()
        one = cfg.replace("[loop]\nworkers = 2\n", "[loop]\nworkers = 1\n", 1)
        assert one != cfg, "tree_kit's FAST_CONFIG changed: set [loop] workers = 1 another way"
        home.config_file.write_text(one)
        try:
            serve(home, cwd=ws)
            yield home
        finally:
            stop(home)
    finally:
        server.stop()


def ask(home: GeodeHome, ws: Path, text: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    r = geode(home, "ask", text, "--json", *extra, cwd=ws, timeout=120)
    try:
        out = json.loads(r.stdout) if r.stdout.strip() else {}
    except json.JSONDecodeError:
        out = {"raw": r.stdout}
    return r.returncode, out, r.stderr


def _json(r: subprocess.CompletedProcess[str]) -> Any:
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def run_cell(
    base: Path, monkeypatch: pytest.MonkeyPatch, child: str, point: str, outcome: str = "applied"
) -> Seen:
    """Serve with ``child@point:kill`` armed, run the faulted turn, wait for ``child`` to come back, reconcile
    the uncertain receipt (as ``outcome``) if there is one, and run a next turn in the same session."""
    ws = base / "ws"
    ws.mkdir()
    effects = base / "effects.log"
    monkeypatch.setenv("GEODE_FAULTS", f"{child}@{point}:kill")
    seen = Seen()
    with one_worker_tree(base, effect_reply(effects), ws) as home:
        monkeypatch.setenv("GEODE_HOME", str(home.root))  # marker() resolves under this home
        t0 = time.monotonic()
        seen.first_rc, seen.first, err = ask(home, ws, "effect one")
        seen.took["first_turn"] = round(time.monotonic() - t0, 2)
        assert marker(point).exists(), f"the fault {point} never fired: {seen.first} {err}"
        wait_children(  # the killed child's next incarnation runs
            home,
            lambda kids: any(
                fnmatch.fnmatchcase(n, child) and ch.state == "running" and ch.incarnation >= 2
                for n, ch in kids.items()
            ),
            timeout_s=60,
        )
        seen.took["until_restarted"] = round(time.monotonic() - t0, 2)
        seen.effects_first = _lines(effects).count("one")
        sid = seen.first.get("session_id") or _only_session(home)
        seen.receipts = _json(geode(home, "receipts", "--session", sid, "--json"))
        seen.uncertain_listed = _uncertain(home)
        seen.status_before = _status(home, sid)
        if seen.receipts:  # an uncertain one is reconciled; a committed one is refused
            r = geode(home, "reconcile", seen.receipts[0]["operation_id"], "--outcome", outcome)
            seen.reconcile_rc, seen.reconcile_out = r.returncode, r.stdout + r.stderr
        seen.listed_after = _uncertain(home)
        seen.second_rc, seen.second, _ = ask(home, ws, "effect two", "--resume", sid)
        seen.effects_second = _lines(effects).count("two")
    return seen


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _uncertain(home: GeodeHome) -> list[str]:
    return [r["operation_id"] for r in _json(geode(home, "receipts", "--uncertain", "--json"))]


def _status(home: GeodeHome, sid: str) -> str:
    rows = _json(geode(home, "sessions", "--json"))
    return next((str(r["status"]) for r in rows if r["session_id"] == sid), "missing")


def _only_session(home: GeodeHome) -> str:
    rows = _json(geode(home, "sessions", "--json"))
    assert len(rows) == 1, rows
    return str(rows[0]["session_id"])
