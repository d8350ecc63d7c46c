"""Finding 7 and the home's file modes, against a real `geode serve`: a run directory another user could
reach (a symlink, someone else's, 0777) is refused before any child; a fresh one is created 0700; the
.env, logs, records and evidence are private."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from geode.home import GeodeHome
from geode.records.evidence import EvidenceLedger
from geode.records.lmdb_env import RecordEnv
from tests.actors.tree_kit import FAST_CONFIG, geode, serve, stop

CHILD_LOGS = ("store.log", "lanes.log", "executor.log", "loop-1.log", "control.log", "supervisor.log")


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


@pytest.fixture
def long_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[GeodeHome]:
    """A 90-byte home path, too long for ``$GEODE_HOME/run/*.sock`` (its cli.sock still fits), with no
    XDG_RUNTIME_DIR: the run dir falls back to ``/tmp/geode-<uid>-<hash>``."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    base = Path(tempfile.mkdtemp(prefix="geode-rd-"))
    root = base / ("h" * (90 - len(str(base)) - 1))
    home = GeodeHome(root)
    assert len(str(root)) == 90
    run = home.run_dir
    assert run.parent == Path("/tmp") and run.name.startswith(f"geode-{os.getuid()}-"), run
    _remove(run)
    root.mkdir()
    root.joinpath("config.toml").write_text(FAST_CONFIG)
    yield home
    _remove(run)
    shutil.rmtree(base, ignore_errors=True)


def _remove(p: Path) -> None:
    if p.is_symlink() or p.is_file():
        p.unlink()
    elif p.exists():
        shutil.rmtree(p)


def _assert_refused(home: GeodeHome, problem: str) -> None:
    proc = geode(home, "serve", "--foreground", timeout=30)
    assert proc.returncode == 78, proc.stdout + proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"geode serve: run directory {home.run_dir} "), proc.stderr
    assert problem in first, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "no child was started" in proc.stderr
    assert not [n for n in CHILD_LOGS if (home.logs_dir / n).exists()]
    assert not (home.root / "incarnations.json").exists()


def test_a_symlinked_run_dir_is_refused(long_home: GeodeHome, tmp_path: Path) -> None:
    target = tmp_path / "attacker"
    target.mkdir(mode=0o700)
    os.symlink(target, long_home.run_dir)
    _assert_refused(long_home, "is a symlink")
    assert list(target.iterdir()) == []  # no socket was bound through the link


def test_a_world_accessible_run_dir_is_refused_not_chmodded(long_home: GeodeHome) -> None:
    long_home.run_dir.mkdir()
    os.chmod(long_home.run_dir, 0o777)
    _assert_refused(long_home, "is group/world-accessible (mode 0777")
    assert _mode(long_home.run_dir) == 0o777
    daemon = geode(long_home, "serve", timeout=60)  # the daemonising `geode serve` says the same line
    assert daemon.returncode == 78, daemon.stdout + daemon.stderr
    assert f"geode serve: run directory {long_home.run_dir} is group/world-accessible" in daemon.stderr
    assert "Traceback" not in daemon.stderr and "ConfigError" not in daemon.stderr
    assert list(long_home.run_dir.iterdir()) == []


def test_a_run_dir_owned_by_another_user_is_refused(long_home: GeodeHome) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to chown")
    long_home.run_dir.mkdir(mode=0o700)
    os.chown(long_home.run_dir, 65534, 65534)
    _assert_refused(long_home, "is owned by uid 65534")
    assert os.lstat(long_home.run_dir).st_uid == 65534


def test_a_fresh_run_dir_is_created_private_and_the_home_is_tightened(long_home: GeodeHome) -> None:
    home = long_home
    home.env_file.write_text("ANTHROPIC_API_KEY=sk-test-key\n")
    os.chmod(home.env_file, 0o644)
    doc = geode(home, "doctor", timeout=30)
    warning = [ln for ln in doc.stdout.splitlines() if "secrets" in ln]
    assert warning and "mode 0644" in warning[0] and "sk-test-key" not in doc.stdout, doc.stdout
    serve(home)
    try:
        assert _mode(home.run_dir) == 0o700 and not home.run_dir.is_symlink()
        assert (home.run_dir / "supervisor.sock").exists()
        assert geode(home, "status", timeout=30).returncode == 0
        assert _mode(home.env_file) == 0o600
        sup_log = (home.logs_dir / "supervisor.log").read_text()
        assert "tightened to 0600" in sup_log and "sk-test-key" not in sup_log
        for d in (home.root, home.logs_dir, home.records_dir, home.evidence_dir):
            assert _mode(d) == 0o700, d
        for name in ("supervisor.log", "store.log"):
            assert _mode(home.logs_dir / name) == 0o600, name
        mdb = [p for p in home.records_dir.rglob("*.mdb")]
        assert mdb and all(_mode(p) == 0o600 for p in mdb), [(p, oct(_mode(p))) for p in mdb]
    finally:
        stop(home)
    doc = geode(home, "doctor", timeout=30)
    assert not [ln for ln in doc.stdout.splitlines() if "secrets" in ln], doc.stdout


def test_evidence_and_records_are_created_private(tmp_path: Path) -> None:
    ledger = EvidenceLedger(tmp_path / "evidence")
    assert ledger.append("s1", "turn.started", {"x": 1})
    assert _mode(tmp_path / "evidence") == 0o700
    assert _mode(ledger.path("s1")) == 0o600
    env = RecordEnv(tmp_path / "records").open()
    try:
        assert _mode(tmp_path / "records") == 0o700
        assert _mode(tmp_path / "records" / "data.mdb") == 0o600
        assert _mode(tmp_path / "records" / "lock.mdb") == 0o600
    finally:
        env.close()


def test_a_private_xdg_runtime_dir_is_preferred_and_a_loose_one_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = GeodeHome(tmp_path / ("h" * 90))
    xdg = Path(tempfile.mkdtemp(prefix="xdg-"))  # mkdtemp: 0700, short enough for the socket paths
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
        assert home.run_dir.parent == xdg
        home.ensure_run_dir()
        assert _mode(home.run_dir) == 0o700
        os.chmod(xdg, 0o755)
        assert home.run_dir.parent == Path("/tmp")
    finally:
        shutil.rmtree(xdg)
