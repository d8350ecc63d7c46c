"""Trust binds to a directory, new project servers wait for approval, and writes to files GEODE executes or
loads as instructions are their own approval class — each against a real `geode serve` tree (issue 26).

Every project server here is a command that appends to a marker file and exits: the marker proves it ran as
the daemon's user. All projects are trusted with `geode trust` before the tree starts and then tampered with,
so the tree's first executor start is the probe:

- ``gone`` removed and re-created (owned by ``nobody``) with its own ``.mcp.json``;
- ``sym`` replaced by a symlink to an untrusted directory; ``ww`` made world-writable;
- ``ok`` edited: a new server ``s2`` and a changed command for ``s3`` (pending until `geode trust ok` again).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from actors.cli.client import ControlClient
from geode.home import GeodeHome
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_home, serve, stop, wait_for

WRITES = [  # (file relative to the workspace, whether it is a file GEODE executes or loads as instructions)
    ("plain-1.txt", False),
    ("GEODE.md", True),
    (".geode/rules/x.md", True),
    (".mcp.json", True),
    ("plain-2.txt", False),
]


def _marker_server(marker: Path) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-c", f"open({str(marker)!r}, 'a').write('ran')"]}


def _mcp(path: Path, servers: dict[str, Path]) -> None:
    (path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {n: _marker_server(m) for n, m in servers.items()}})
    )


def _reply(ws: Path):  # type: ignore[no-untyped-def]
    def reply(req: Any) -> Any:
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        done = sum(
            1
            for m in msgs
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"
        )
        if "WRITES" not in json.dumps(msgs[:1]) or done >= len(WRITES):
            return {"text": "done"}
        rel = WRITES[done][0]
        return {"tool_calls": [{"name": "write_file", "input": {"file_path": str(ws / rel), "content": "x"}}]}

    return reply


@dataclass
class Rig:
    home: GeodeHome
    base: Path
    ws: Path

    def m(self, name: str) -> Path:
        return self.base / f"m-{name}"

    def mcp_rows(self) -> dict[str, dict[str, Any]]:
        r = geode(self.home, "mcp-servers", "--json", timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
        return {x["name"]: x for x in json.loads(r.stdout)["servers"]}

    def doctor_mcp(self) -> list[str]:
        r = geode(self.home, "doctor", "--json", cwd=self.base, timeout=60)
        return [c["detail"] for c in json.loads(r.stdout)["checks"] if c["name"] == "mcp"]

    def log(self) -> str:
        return (self.home.logs_dir / "executor.log").read_text(errors="replace")


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    base = tmp_path_factory.mktemp("trust")
    ws = base / "ws"
    ws.mkdir()
    model = ScriptedServer(_reply(ws)).start()
    try:
        home = scripted_home(base, model, ws)
        rig = Rig(home, base, ws)
        projects = {p: base / p for p in ("ok", "gone", "sym", "ww")}
        for name, path in projects.items():
            path.mkdir()
            _mcp(
                path,
                {f"{name}1": rig.m(f"{name}1")} if name != "ok" else {"s1": rig.m("s1"), "s3": rig.m("s3a")},
            )
            r = geode(home, "trust", str(path), timeout=60)
            assert r.returncode == 0 and f"trusted: {path}" in r.stdout, r.stdout + r.stderr
        # the probes: each after `geode trust`, before the executor's next start
        shutil.rmtree(projects["gone"])
        projects["gone"].mkdir()
        _mcp(projects["gone"], {"evil_gone": rig.m("evil_gone")})
        nobody = pwd.getpwnam("nobody")
        for p in (projects["gone"], projects["gone"] / ".mcp.json"):
            os.chown(p, nobody.pw_uid, nobody.pw_gid)
        evil = base / "evil"
        evil.mkdir()
        _mcp(evil, {"evil_sym": rig.m("evil_sym")})
        projects["sym"].rename(base / "sym-was")
        projects["sym"].symlink_to(evil)
        _mcp(projects["ww"], {"evil_ww": rig.m("evil_ww")})  # the same uid, but anyone could have written it
        projects["ww"].chmod(0o777)
        _mcp(projects["ok"], {"s1": rig.m("s1"), "s2": rig.m("s2"), "s3": rig.m("s3b")})
        serve(home)
        try:
            wait_for(lambda: rig.m("s1").exists(), 60, what="the approved server of the trusted project")
            yield rig
        finally:
            stop(home)
    finally:
        model.stop()


def test_a_recreated_symlinked_or_world_writable_trusted_directory_starts_nothing(rig: Rig) -> None:
    rows = rig.mcp_rows()
    assert rows["s1"]["origin"] == str(rig.base / "ok"), rows
    for name in ("evil_gone", "evil_sym", "evil_ww", "gone1", "sym1", "ww1"):
        assert name not in rows, rows
        assert not rig.m(name).exists(), f"{name} ran as the daemon's user"
    gone, sym, ww = (rig.base / p for p in ("gone", "sym", "ww"))
    named = {
        gone: "is not the directory that was trusted",
        sym: "is now a symbolic link",
        ww: "is now world-writable",
    }
    log = rig.log()
    doctor = "\n".join(rig.doctor_mcp())
    for path, why in named.items():
        line = f"trust dropped for {path}: {path} {why}"
        assert line in log, log[-3000:]
        assert line in doctor, doctor
        assert f"run `geode trust {path}` again" in doctor
    assert "owner uid 65534" in doctor  # the re-created directory is named with its new owner
    listed = geode(rig.home, "trust", "--list", timeout=30).stdout
    assert f"{gone}: trust dropped" in listed and f"{sym}: trust dropped" in listed, listed


def test_trust_refuses_a_directory_others_can_write_or_own(rig: Rig) -> None:
    for path in (rig.base / "ww", rig.base / "gone"):
        r = geode(rig.home, "trust", str(path), timeout=30)
        assert r.returncode == 2 and "refusing to trust it" in r.stderr, r.stdout + r.stderr
    assert not rig.m("evil_ww").exists() and not rig.m("evil_gone").exists()


def test_a_new_or_changed_project_server_waits_for_approval(rig: Rig) -> None:
    ok = rig.base / "ok"
    rows = rig.mcp_rows()
    for name in ("s2", "s3"):
        assert rows[name]["state"] == "pending approval" and rows[name]["origin"] == str(ok), rows
    assert not rig.m("s2").exists() and not rig.m("s3a").exists() and not rig.m("s3b").exists()
    doctor = "\n".join(rig.doctor_mcp())
    assert f"server 's2' of project {ok} is new since `geode trust`: pending approval" in doctor, doctor
    assert f"server 's3' of project {ok} runs something else" in doctor, doctor
    assert "server 's2'" in rig.log() and "pending approval" in rig.log()
    r = geode(rig.home, "trust", str(ok), timeout=60)  # reviewed and approved: the executor restarts
    assert r.returncode == 0, r.stdout + r.stderr
    assert "approved MCP server s2 (new)" in r.stdout and "approved MCP server s3 (changed" in r.stdout
    wait_for(lambda: rig.m("s2").exists() and rig.m("s3b").exists(), 60, what="the approved servers to start")
    assert not rig.m("s3a").exists()  # the command as it was trusted is gone; the new one ran


def test_writes_to_files_geode_loads_ask_as_their_own_class_after_an_always(rig: Rig) -> None:
    asked: list[dict[str, Any]] = []

    def on_approval(data: dict[str, Any]) -> str:
        asked.append(data)
        return "a" if len(asked) == 1 else "n"  # "always" for the first ordinary write; no to the rest

    cl = ControlClient(rig.home)
    try:
        cl.connect(cwd=str(rig.ws), is_tty=True)
        out = cl.run_prompt("WRITES: write the files", on_approval=on_approval, timeout_s=120)
    finally:
        cl.close()
    assert out["text"] == "done", out
    details = [a["detail"] for a in asked]
    assert len(asked) == 4, details  # the second ordinary write ran under the "always"; the others asked
    assert "plain-1.txt" in details[0] and not details[0].startswith("[")
    assert details[1].startswith(f"[writes a file GEODE loads as instructions: {rig.ws / 'GEODE.md'}]")
    rules = rig.ws / ".geode" / "rules" / "x.md"
    assert details[2].startswith(f"[writes a file GEODE loads as instructions: {rules}]"), details[2]
    assert details[3].startswith(f"[writes a file GEODE executes: {rig.ws / '.mcp.json'}]"), details[3]
    assert (rig.ws / "plain-1.txt").exists() and (rig.ws / "plain-2.txt").exists()
    for rel, loaded in WRITES:
        assert (rig.ws / rel).exists() is not loaded, rel  # denied: never written
