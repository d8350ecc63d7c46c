"""Issue 34, the executor's work per tool call, counted (never timed): a call resolves its workspace once,
takes the secret files' identities once, asks about GEODE homes once per directory it walks, and reuses its
handler threads; the text-based path checks answer as the pathlib ones they replace."""

from __future__ import annotations

import contextvars
import os
import random
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import geode.tools.checks as checks_module
import geode.tools.secret_files as secret_files
from geode.tools.dispatch import WORKERS
from geode.tools.handlers import HandlerEntry, ToolEnv
from geode.tools.paths import Under, within
from geode.tools.secret_files import SecretFiles
from tests.tools.conftest import Rig, probe_spec


def _counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> Counter[str]:
    """Count the calls of ``owner.name`` (a module function) while the test runs."""
    seen: Counter[str] = Counter()
    real: Callable[..., Any] = getattr(owner, name)

    def counted(*a: Any, **kw: Any) -> Any:
        seen[name] += 1
        return real(*a, **kw)

    monkeypatch.setattr(owner, name, counted)
    return seen


def _tree(ws: Path, dirs: int = 3, files: int = 8) -> None:
    for d in range(dirs):
        sub = ws / f"d{d}"
        sub.mkdir()
        for f in range(files):
            (sub / f"f{f}.txt").write_text("x\n")


def test_a_glob_resolves_its_workspace_once_and_scans_the_secret_files_once(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = make_rig()
    _tree(rig.workspace)
    resolved = _counting(monkeypatch, checks_module, "workspace_of")
    scans: Counter[str] = Counter()
    real_scan = SecretFiles.scan.__func__  # type: ignore[attr-defined]

    def scan(cls: type[SecretFiles], *a: Any, **kw: Any) -> SecretFiles:
        scans["scan"] += 1
        return real_scan(cls, *a, **kw)  # type: ignore[no-any-return]

    monkeypatch.setattr(SecretFiles, "scan", classmethod(scan))
    homes = _counting(monkeypatch, secret_files, "is_geode_home")
    out = rig.call("glob_files", {"pattern": "**/f3.txt"})
    assert not out.is_error, out.content
    assert len(out.content["files"]) == 3
    print(f"per glob call: {dict(resolved)} {dict(scans)} {dict(homes)}")
    assert resolved["workspace_of"] == 1  # was 10: every check resolved the workspace again
    assert scans["scan"] == 1  # was 2: the path argument's check and the walk each took the identities
    # each directory walked (the workspace, its 3 subfolders) and their ancestors asked about once
    assert homes["is_geode_home"] <= 4 + len(rig.workspace.parents)


def test_handler_threads_are_reused_and_each_call_starts_in_an_empty_context(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    mark: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="")
    seen: list[tuple[str, str]] = []

    def handler(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
        seen.append((mark.get(), threading.current_thread().name))
        mark.set("left by an earlier call")
        return {"ok": True}

    rig = make_rig((probe_spec("ctx_probe"),), handlers={"test:ctx_probe": HandlerEntry(handler)})
    rig.call("ctx_probe", {"x": 0})  # a thread to reuse
    starts = _counting(monkeypatch, threading.Thread, "start")
    for i in range(10):
        assert not rig.call("ctx_probe", {"x": i}).is_error
    print(f"threads started for 10 calls: {starts['start']}")
    assert starts["start"] == 0  # was 10: a new thread per call
    assert all(m == "" for m, _ in seen)  # nothing of a previous call's context
    assert all(name.startswith("tool-op-") for _, name in seen)


def test_a_call_past_its_deadline_keeps_its_thread_and_the_next_call_runs(
    make_rig: Callable[..., Rig],
) -> None:
    release, entered = threading.Event(), threading.Event()

    def slow(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
        entered.set()
        release.wait(30)
        return {"ok": True}

    spec = probe_spec("slow").model_copy(update={"deadline_s": 0.2})
    rig = make_rig((spec,), handlers={"test:slow": HandlerEntry(slow)})
    try:
        late = rig.call("slow", {"x": 1})
        assert entered.is_set() and late.is_error and late.error_type == "tool_timeout", late
        ok = rig.call("probe", {"x": 2})  # another thread: the stuck one is still busy
        assert not ok.is_error and rig.probes["probe"].calls == [{"x": 2}]
    finally:
        release.set()
    assert WORKERS.started >= 2


def _random_path(rng: random.Random, names: list[str]) -> str:
    parts = [rng.choice(names) for _ in range(rng.randint(0, 4))]
    return "/" + "/".join(parts)


def test_the_text_checks_answer_as_the_pathlib_ones() -> None:
    rng = random.Random(34)
    names = ["a", "b", "ab", "a.b", "workspace", "x y"]
    for _ in range(2000):
        roots = tuple(Path(_random_path(rng, names)) for _ in range(rng.randint(0, 3)))
        p = _random_path(rng, names)
        assert Under(roots).holds(p) is within(Path(p), roots), (p, roots)
        assert Under(roots).holds(Path(p)) is within(Path(p), roots), (p, roots)


def test_homes_found_per_directory_answer_as_the_walk_up(tmp_path: Path) -> None:
    rng = random.Random(7)
    root = tmp_path / "t"
    dirs = [root]
    for i in range(40):
        d = rng.choice(dirs) / rng.choice(["workspace", "workspaces", f"p{i}", "records"])
        d.mkdir(parents=True, exist_ok=True)
        dirs.append(d)
    for d in rng.sample(dirs, 6):  # some of them are GEODE homes
        (d / "records").mkdir(exist_ok=True)
        (d / "evidence").mkdir(exist_ok=True)
    handled = (rng.choice(dirs),)
    fast, slow = SecretFiles({}, handled), SecretFiles({}, handled)
    checked = 0
    every = set(dirs) | {p for d in dirs for p in d.parents}
    for here in sorted(every, key=lambda p: -len(p.parts)):  # the deepest first: nothing memoised yet
        assert fast.in_other_home(here) is slow._inside_by_parts(here), here
        checked += int(fast.in_other_home(here))
    assert checked  # some directories are in a home
    assert os.path.isdir(root)
