"""Issue 34, the executor's work per tool call, counted (never timed): a call resolves its workspace once,
takes the secret files' identities once, asks about GEODE homes once per directory it walks, and reuses its
handler threads; the text-based path checks answer as the pathlib ones they replace."""

from __future__ import annotations

import contextvars
import fnmatch
import functools
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
import geode.tools.timeline as timeline_module
from geode.records.models import TimelineEvent
from geode.tools.builtin.search import _matches
from geode.tools.dispatch import WORKERS
from geode.tools.handlers import HandlerEntry, ToolEnv
from geode.tools.paths import Under, within
from geode.tools.secret_files import SecretFiles
from geode.tools.spec import EffectClass
from tests.tools.conftest import Rig, probe_spec
from tests.waiting import poll_for


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


def _store_calls(monkeypatch: pytest.MonkeyPatch, rig: Rig) -> Counter[str]:
    """The store requests the executor's store client makes, by message type."""
    seen: Counter[str] = Counter()
    client = rig.store.client
    real = client._call

    def counted(type_: str, body: Any, **kw: Any) -> dict[str, Any]:
        seen[type_] += 1
        return real(type_, body, **kw)

    monkeypatch.setattr(client, "_call", counted)
    return seen


def test_a_read_only_calls_two_rows_go_to_the_store_in_one_request(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = make_rig()
    (rig.workspace / "a.txt").write_text("a\n")
    calls = _store_calls(monkeypatch, rig)
    out = rig.call("glob_files", {"pattern": "*.txt"}, session_id="s-one")
    assert not out.is_error, out.content
    assert rig.executor.timeline.flush(5)
    sent = dict(calls)
    print(f"store requests for one read-only call: {sent}")
    assert sent == {"store.timeline.append_many": 1}  # was 2 x store.timeline.append
    rows = rig.timeline("s-one")
    assert [r.kind for r in rows] == ["tool.called", "tool.completed"]
    assert rows[0].payload["tool_name"] == rows[1].payload["tool_name"] == "glob_files"
    assert rows[0].payload["approval"] and rows[1].payload["status"] == "ok"
    assert rig.executor.timeline.failures == 0


def test_a_slow_read_only_call_is_on_the_timeline_before_it_ends(make_rig: Callable[..., Rig]) -> None:
    release, entered = threading.Event(), threading.Event()

    def slow(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
        entered.set()
        release.wait(30)
        return {"ok": True}

    spec = probe_spec("slow_read")
    assert spec.policy.effect is EffectClass.READ
    rig = make_rig((spec,), handlers={"test:slow_read": HandlerEntry(slow)})
    done: list[Any] = []
    worker = threading.Thread(
        target=lambda: done.append(rig.call("slow_read", {"x": 1}, session_id="s-slow"))
    )
    worker.start()
    try:
        poll_for(entered.is_set, 10, what="the handler to start")
        kinds = poll_for(
            lambda: [r.event.kind for r in rig.store.client.read_timeline("s-slow")],
            10,
            what="the tool.called row while the call runs",
        )
        assert kinds == ["tool.called"] and not done
    finally:
        release.set()
        worker.join(10)
    assert done and not done[0].is_error
    assert [r.kind for r in rig.timeline("s-slow")] == ["tool.called", "tool.completed"]


def test_read_only_calls_wake_the_timeline_writer_once_per_hold_not_once_per_call(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Session 5: both rows of a read-only call are held (up to HOLD_S from the oldest queued row), so the
    rows of the calls made meanwhile go in one store request and the calls do not wake the writer: only
    the first row, queued while the writer slept with nothing queued, does. (Session 3 woke it once per call,
    for the call's end row; before that twice.)"""
    monkeypatch.setattr(timeline_module, "HOLD_S", 5.0)  # every call below within one hold
    rig = make_rig((probe_spec("quick_read"),))
    cv = rig.executor.timeline._cv
    real_notify = cv.notify_all
    wakes: Counter[str] = Counter()

    def notify_all() -> None:
        if threading.current_thread() is threading.main_thread():
            wakes["by a call"] += 1
        real_notify()

    monkeypatch.setattr(cv, "notify_all", notify_all)
    calls = _store_calls(monkeypatch, rig)
    for i in range(5):
        assert not rig.call("quick_read", {"x": i}, session_id="s-wake").is_error
    woken = wakes["by a call"]
    assert rig.executor.timeline.flush(10)
    print(f"timeline writer woken by 5 read-only calls: {woken}; store requests {dict(calls)}")
    assert woken <= 1  # was 5: each call's end row woke the writer (1: the writer was asleep, idle)
    assert dict(calls) == {"store.timeline.append_many": 1}  # the ten rows in one request
    rows = rig.timeline("s-wake")
    assert [r.kind for r in rows] == ["tool.called", "tool.completed"] * 5
    assert [r.payload["arguments"]["x"] for r in rows] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert rig.executor.timeline.failures == 0


def test_a_row_of_a_call_with_an_effect_takes_the_held_rows_with_it_at_once(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timeline_module, "HOLD_S", 30.0)  # held rows would wait far longer than the test
    rig = make_rig()
    calls = _store_calls(monkeypatch, rig)
    assert not rig.call("probe", {"x": 1}, session_id="s-mix").is_error
    assert not rig.call("probe_write", {"x": 2}, session_id="s-mix").is_error
    kinds = poll_for(
        lambda: (k := [r.event.kind for r in rig.store.client.read_timeline("s-mix")]) and len(k) == 4 and k,
        10,
        what="the four rows without a flush",
    )
    assert kinds == ["tool.called", "tool.completed"] * 2
    assert calls["store.timeline.append_many"] >= 1


def test_rows_sent_together_are_appended_in_order_and_a_refused_one_alone(
    make_rig: Callable[..., Rig],
) -> None:
    client = make_rig().store.client
    row = {"session_id": "s-many", "kind": "tool.called", "ts": 1.0, "payload": {"n": 1}}
    assert client.append_timelines([TimelineEvent(event_id="e1", **row)]) == []
    errors = client.append_timelines(
        [
            TimelineEvent(event_id="e2", **row),
            TimelineEvent(event_id="e1", **{**row, "payload": {"n": 2}}),  # e1 again, other content
            TimelineEvent(event_id="e3", **row),
        ]
    )
    assert len(errors) == 1 and errors[0].startswith("e1: Conflict"), errors
    assert [(r.seq, r.event.event_id) for r in client.read_timeline("s-many")] == [
        (1, "e1"),
        (2, "e2"),
        (3, "e3"),
    ]


def _matches_by_search(segs: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """The glob matcher as it was: a memoised search over (segment, part)."""

    @functools.cache
    def m(i: int, j: int) -> bool:
        if i == len(segs):
            return j == len(parts)
        if segs[i] == "**":
            return any(m(i + 1, k) for k in range(j, len(parts) + 1))
        return j < len(parts) and fnmatch.fnmatchcase(parts[j], segs[i]) and m(i + 1, j + 1)

    return m(0, 0)


def test_the_glob_matcher_answers_as_the_search_it_replaces() -> None:
    rng = random.Random(34)
    pool, names = ["**", "*", "a", "b*", "*.txt", "?", "[ab]"], ["a", "b", "a.txt", "bb", "c.txt"]
    for _ in range(5_000):
        raw = [rng.choice(pool) for _ in range(rng.randint(1, 4))]
        segs = tuple(s for i, s in enumerate(raw) if not (s == "**" and i and raw[i - 1] == "**"))
        parts = tuple(rng.choice(names) for _ in range(rng.randint(0, 5)))
        assert _matches(segs, parts) is _matches_by_search(segs, parts), (segs, parts)


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
