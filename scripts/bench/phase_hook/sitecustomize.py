"""Per-phase turn timestamps for ``sessions_scale.py --phases`` (bench only, never on a product path).

On ``PYTHONPATH`` of the tree's processes with ``GEODE_PHASES=DIR`` set, this wraps a few functions of the
loop worker, lanes and the store writer as their modules are first imported (before the zygote forks) and
appends one line per call to ``DIR/<pid>.txt``: ``name key t0 t1`` (``time.monotonic()``, one clock for every
process on the machine). ``key`` is the turn id where the call has one, else ``<pid>:t<thread id>``. The
report (:mod:`turn_phases`) joins them with the client's turns. Without ``GEODE_PHASES`` nothing is wrapped.
"""

from __future__ import annotations

import importlib.abc
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import executor_hook  # (this directory is on the tree's PYTHONPATH)
import reply_hook

OUT = os.environ.get("GEODE_PHASES")
_fds: dict[int, int] = {}
_submitted: dict[int, float] = {}  # id(a queued write's Later) -> when it was queued


def _write(line: str) -> None:
    pid = os.getpid()
    fd = _fds.get(pid)
    if fd is None:
        fd = _fds[pid] = os.open(f"{OUT}/{pid}.txt", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, line.encode())


def _wrap(name: str, fn: Callable[..., Any], key: Callable[..., str] | None = None) -> Callable[..., Any]:
    def timed(*a: Any, **k: Any) -> Any:
        t0 = time.monotonic()
        try:
            return fn(*a, **k)
        finally:
            t1 = time.monotonic()
            try:
                kk = key(*a, **k) if key else ""
            except Exception:
                kk = ""
            _write(f"{name} {kk or f'{os.getpid()}:t{threading.get_ident()}'} {t0:.6f} {t1:.6f}\n")

    timed.__wrapped__ = fn  # type: ignore[attr-defined]
    return timed


def _turn_key(self: Any, run: Any, *a: Any, **k: Any) -> str:
    return f"{run.turn_id}@{os.getpid()}:t{threading.get_ident()}"


def _patch(mod: Any) -> None:
    n = mod.__name__
    if n == "geode.loop.agent":
        for attr, name in (("call_model", "model"), ("process_batch", "batch"), ("prepare_call", "prepare"),
                           ("open_turn", "open"), ("finish_turn", "finish")):  # fmt: skip
            setattr(mod, attr, _wrap(name, getattr(mod, attr)))
    elif n == "geode.loop.batch":
        mod.run_calls = _wrap("tools", mod.run_calls)
    elif n == "geode.loop.checkpoint":
        mod.Checkpointer.save = _wrap("save", mod.Checkpointer.save)
    elif n == "actors.loop_worker":
        w = mod.LoopWorker
        w.run_turn_held = _wrap("turn", w.run_turn_held, _turn_key)
        w.accept = _wrap("accept", w.accept, lambda self, run, *a, **k: run.turn_id)
        w.report_done = _wrap("report", w.report_done, lambda self, run, *a, **k: run.turn_id)
    elif n == "geode.lanes.service":
        s = mod.LanesService
        s.submit = _wrap("submit", s.submit, lambda self, sub, r: sub.turn_id)
        s._started = _wrap("started", s._started, lambda self, g, *a: g.turn_id)
        s.turn_done = _wrap("done", s.turn_done, lambda self, d, r: d.turn_id)
        s._done_stored = _wrap("donestored", s._done_stored, lambda self, f, o: f.turn_id)
    elif n == "geode.lanes.continued_store":
        c = mod.LanesStoreClient
        c.put_turn_then = _wrap("put", c.put_turn_then, lambda self, t, then: f"{t.turn_id}/{t.state.value}")
        mod._stored = _wrap("putreply", mod._stored, lambda b: f"{b['turn']['turn_id']}/{b['turn']['state']}")
    elif n == "geode.records.service":
        sv = mod.StoreService
        sv._put_turn = _wrap("storeput", sv._put_turn, lambda self, b, r: f"{b.turn_id}/{b.state.value}")
    elif n == "geode.records.writer":
        _patch_writer(mod.GroupWriter)
    elif n in executor_hook.TARGETS:  # the executor hop, per tool call
        executor_hook.patch(mod, _write)
    elif n in reply_hook.TARGETS:  # a store reply's way to lanes
        reply_hook.patch(mod, _write)


def _patch_writer(gw: Any) -> None:
    submit, apply, attempt = gw.submit, gw._apply, gw._attempt
    committed = threading.local()

    def timed_submit(self: Any, fn: Any) -> Any:
        t = time.monotonic()
        later = submit(self, fn)
        _submitted[id(later)] = t
        return later

    def timed_attempt(self: Any, batch: list[Any]) -> Any:
        try:
            return attempt(self, batch)
        finally:
            committed.t = time.monotonic()

    def timed_apply(self: Any, batch: list[Any]) -> None:
        t0 = time.monotonic()
        try:
            apply(self, batch)
        finally:
            t1, tc = time.monotonic(), getattr(committed, "t", 0.0)
            for op in batch:  # queued, commit start, commit end, every waiter answered
                _write(f"op {_submitted.pop(id(op.future), 0.0):.6f} {t0:.6f} {tc:.6f} {t1:.6f}\n")

    gw.submit, gw._apply, gw._attempt = timed_submit, timed_apply, timed_attempt


TARGETS = frozenset(
    {"geode.loop.agent", "geode.loop.batch", "geode.loop.checkpoint", "actors.loop_worker"}
    | {"geode.lanes.service", "geode.lanes.continued_store", "geode.records.writer", "geode.records.service"}
    | executor_hook.TARGETS
    | reply_hook.TARGETS
)


class _Finder(importlib.abc.MetaPathFinder):
    """Patches a target module right after it is executed (its first import)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in TARGETS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader: Any = spec.loader
        if loader is None:
            return None
        run = loader.exec_module

        def exec_module(module: Any, run: Any = run) -> None:
            run(module)
            _patch(module)

        loader.exec_module = exec_module
        return spec


if OUT:
    sys.meta_path.insert(0, _Finder())
