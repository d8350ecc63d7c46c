"""The file tools' boundary, in process: symlinks out are skipped and counted (grep, glob, list_dir), FIFOs
are never opened, invalid paths are `invalid_tool_input` before dispatch, new files get the umask, and the
GEODE home (and its run dir) is never inside the allowed roots."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from geode.home import GeodeHome


class _Yes:
    def request(self, ctx, tool_name, detail, safety):  # type: ignore[no-untyped-def]
        return "y"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (out / "secret.txt").write_text("top secret\n")
    return out


@pytest.fixture
def rig(make_rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GEODE_HOME", str(tmp_path / "elsewhere-home"))
    return make_rig(approvals=_Yes())


def test_grep_does_not_read_through_a_symlink_pointing_out(rig, outside: Path) -> None:
    ws = rig.workspace
    (ws / "link").symlink_to(outside / "passwd")
    (ws / "mine.txt").write_text("root: mine\n")
    (ws / "inlink").symlink_to(ws / "mine.txt")  # a symlink that stays inside is still searched
    res = rig.call("grep_files", {"pattern": "^root:", "path": "."})
    assert not res.is_error, res.content
    assert res.content["matches"] == [f"{ws / 'inlink'}:1:root: mine", f"{ws / 'mine.txt'}:1:root: mine"]
    assert res.content["skipped_outside_roots"] == 1


def test_glob_lists_nothing_through_a_symlinked_directory_pointing_out(rig, outside: Path) -> None:
    ws = rig.workspace
    (ws / "out").symlink_to(outside, target_is_directory=True)
    (ws / "a.txt").write_text("a")
    for pattern in ("**/*", "out/*", "*/*.txt", "**/secret.txt"):
        res = rig.call("glob_files", {"pattern": pattern})
        assert not res.is_error, res.content
        assert not any("out" in Path(f).relative_to(ws).parts for f in res.content["files"]), pattern
        assert not any(str(outside) in f for f in res.content["files"]), pattern
    assert rig.call("glob_files", {"pattern": "**/*"}).content["skipped_outside_roots"] == 1
    up = rig.call("glob_files", {"pattern": "../outside/*"})
    assert up.is_error and up.error_type == "invalid_tool_input"


def test_list_dir_skips_and_counts_a_symlink_pointing_out(rig, outside: Path) -> None:
    (rig.workspace / "out").symlink_to(outside, target_is_directory=True)
    (rig.workspace / "f").write_text("x")
    res = rig.call("list_dir", {"path": "."})
    assert [e["name"] for e in res.content["entries"]] == ["f"]
    assert res.content["skipped_outside_roots"] == 1


def test_a_fifo_is_skipped_by_grep_and_refused_by_read_edit_write(rig) -> None:
    ws = rig.workspace
    os.mkfifo(ws / "pipe")
    (ws / "plain.txt").write_text("needle\n")
    deadline_ms = int(time.time() * 1000) + 5000  # today's grep blocks on the FIFO until this deadline
    started = time.monotonic()
    res = rig.call("grep_files", {"pattern": "needle", "path": "."}, deadline_ms=deadline_ms)
    assert not res.is_error, res.content
    assert res.content["matches"] == [f"{ws / 'plain.txt'}:1:needle"]
    assert res.content["skipped_not_regular"] == 1
    direct = rig.call("grep_files", {"pattern": "x", "path": "pipe"}, deadline_ms=deadline_ms)
    assert direct.content["matches"] == [] and direct.content["skipped_not_regular"] == 1
    assert time.monotonic() - started < 3
    for name, args in (
        ("read_file", {"file_path": "pipe"}),
        ("edit_file", {"file_path": "pipe", "old_string": "a", "new_string": "b"}),
        ("write_file", {"file_path": "pipe", "content": "x"}),
    ):
        r = rig.call(name, args, deadline_ms=deadline_ms)
        assert r.error_type == "not_a_regular_file" and "FIFO" in r.content["error"], (name, r.content)
    assert stat.S_ISFIFO(os.lstat(ws / "pipe").st_mode)  # write_file did not replace it


@pytest.mark.parametrize(
    "name,args",
    [
        ("read_file", {"file_path": "a\x00b"}),
        ("write_file", {"file_path": "x\x00/../../etc/passwd", "content": "x"}),
        ("grep_files", {"pattern": "x", "path": ".\x00"}),
        ("list_dir", {"path": "d" * 300}),
        ("read_file", {"file_path": "/".join(["abcdefgh"] * 600)}),
    ],
)
def test_invalid_paths_are_invalid_tool_input_before_dispatch(rig, name: str, args: dict) -> None:
    res = rig.call(name, args)
    assert res.is_error and res.error_type == "invalid_tool_input", res.content
    assert res.content["reason"] == "invalid_path" and res.content["denied"] is True
    assert res.executed is False
    denied = [e for e in rig.timeline() if e.kind == "tool.denied"]
    assert denied and denied[-1].payload.get("stage") == "policy"


def test_new_files_get_the_umask_and_existing_files_keep_their_mode(rig) -> None:
    old = os.umask(0o022)
    try:
        assert not rig.call("write_file", {"file_path": "new.txt", "content": "x"}).is_error
        assert stat.S_IMODE(os.stat(rig.workspace / "new.txt").st_mode) == 0o644
        os.umask(0o027)
        assert not rig.call("write_file", {"file_path": "sub/other.txt", "content": "x"}).is_error
        assert stat.S_IMODE(os.stat(rig.workspace / "sub/other.txt").st_mode) == 0o640
        kept = rig.workspace / "kept.txt"
        kept.write_text("a")
        os.chmod(kept, 0o600)
        assert not rig.call("write_file", {"file_path": "kept.txt", "content": "b"}).is_error
        edit = {"file_path": "kept.txt", "old_string": "b", "new_string": "c"}
        assert not rig.call("edit_file", edit).is_error
        assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600 and kept.read_text() == "c"
    finally:
        os.umask(old)


@pytest.fixture
def workspace() -> Iterator[Path]:
    """A short workspace under /tmp: a home inside it keeps its ipc run dir (``gh/run``) within the socket
    path limit, also under pytest-xdist's longer temporary paths."""
    base = Path(tempfile.mkdtemp(prefix="fb-", dir="/tmp"))
    ws = base / "ws"
    ws.mkdir()
    yield ws
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def home_in_ws(make_rig, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator:  # type: ignore[type-arg]
    """The default layout: the workspace contains GEODE_HOME (short, so its run dir is ``gh/run``)."""
    home = GeodeHome(workspace / "gh").ensure()
    home.env_file.write_text("ANTHROPIC_API_KEY=sk-ant-secret-1\n")
    assert home.run_dir.is_relative_to(workspace)
    home.ensure_run_dir()
    (home.run_dir / "note.txt").write_text("ANTHROPIC_API_KEY=sk-ant-secret-2\n")
    (home.root / "workspace").mkdir()
    monkeypatch.setenv("GEODE_HOME", str(home.root))
    yield make_rig(approvals=_Yes()), home


def test_the_home_and_run_dir_are_never_inside_the_roots(home_in_ws) -> None:  # type: ignore[no-untyped-def]
    rig, home = home_in_ws
    ws = rig.workspace
    for target in (home.env_file, home.run_dir / "note.txt"):
        res = rig.call("read_file", {"file_path": str(target.relative_to(ws))})
        assert res.is_error and res.content["reason"] == "geode_home", res.content
    (ws / "envlink").symlink_to(home.env_file)
    assert rig.call("read_file", {"file_path": "envlink"}).content["reason"] == "geode_home"
    grep = rig.call("grep_files", {"pattern": "ANTHROPIC_API_KEY", "path": "."})
    assert grep.content["matches"] == [] and grep.content["skipped_geode_home"] >= 2, grep.content
    ls = rig.call("list_dir", {"path": "."}).content
    assert "gh" not in [e["name"] for e in ls["entries"]] and ls["skipped_geode_home"] == 2  # gh, envlink
    listed = rig.call("glob_files", {"pattern": "**/*"}).content["files"]
    assert not any("sk-ant" in Path(f).read_text() for f in listed if Path(f).is_file())
    assert not any(Path(f).resolve().is_relative_to(home.root) for f in listed), listed
    # explicit roots that contain the home do not re-admit it
    rig2 = rig.__class__(rig.executor, rig.plan, rig.probes, ws, rig.store)
    rig2.executor._checks.roots = (ws.parent,)
    assert rig2.call("read_file", {"file_path": str(home.env_file)}).content["reason"] == "geode_home"
    # the home's own default workspace stays usable
    ok = rig.call("write_file", {"file_path": str(home.root / "workspace" / "w.txt"), "content": "w"})
    assert not ok.is_error, ok.content


def test_the_exclusion_is_the_home_and_its_run_dir(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "rt").mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "rt"))
    home = GeodeHome(tmp_path / ("h" * 90))  # too long for ipc paths: the run dir lives elsewhere
    assert not home.run_dir.is_relative_to(home.root)
    from geode.tools.paths import Exclusion  # new in this change

    ex = Exclusion.of_home(home)
    assert ex.covers(home.root.resolve() / ".env") and ex.covers(Path(os.path.realpath(home.run_dir)) / "x")
    assert not ex.covers(home.root.resolve() / "workspace" / "f") and not ex.covers(tmp_path)
    # a home whose workspace/ is a symlink to the directory holding the home does not re-admit the home
    tricky = GeodeHome(tmp_path / "th" / "gh")
    tricky.root.mkdir(parents=True)
    (tricky.root / "workspace").symlink_to(tmp_path / "th", target_is_directory=True)
    assert Exclusion.of_home(tricky).covers(tricky.root.resolve() / ".env")
