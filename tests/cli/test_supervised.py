"""`geode stop` under supervisord: the tree's supervisor is recognised as supervisord's program."""

from __future__ import annotations

from pathlib import Path

from actors.cli.supervised import supervisord_notice, supervisord_of


def _proc(root: Path, pid: int, ppid: int, cmd: str, env: dict[str, str]) -> None:
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "stat").write_text(f"{pid} (python) S {ppid} 1 1 0 -1")
    (d / "cmdline").write_bytes(cmd.replace(" ", "\0").encode() + b"\0")
    (d / "environ").write_bytes(b"".join(f"{k}={v}\0".encode() for k, v in env.items()))


def test_a_tree_started_by_supervisord_gets_the_notice(tmp_path):
    _proc(tmp_path, 10, 1, "/usr/bin/python3 /usr/bin/supervisord -n -c supervisord.conf", {})
    env = {"SUPERVISOR_ENABLED": "1", "SUPERVISOR_PROCESS_NAME": "geode"}
    _proc(tmp_path, 20, 10, "/x/.venv/bin/geode serve --foreground", env)
    assert supervisord_of(20, proc=tmp_path) == 10
    notice = supervisord_notice(20, proc=tmp_path)
    assert notice is not None and "supervisord (pid 10)" in notice
    assert "supervisorctl -c supervisord.conf stop geode" in notice


def test_a_plain_daemon_gets_no_notice(tmp_path):
    _proc(tmp_path, 10, 1, "/sbin/init", {})
    _proc(tmp_path, 20, 10, "/x/.venv/bin/geode serve --foreground", {"HOME": "/root"})
    assert supervisord_of(20, proc=tmp_path) is None
    assert supervisord_notice(20, proc=tmp_path) is None
    assert supervisord_notice(None, proc=tmp_path) is None
