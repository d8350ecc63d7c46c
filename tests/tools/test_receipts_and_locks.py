"""Receipts (REPLAY, UNCERTAIN, CONFLICT, deadline → uncertain) and per-file locks across sessions."""

from __future__ import annotations

import threading
import time

from geode.tools.handlers import HandlerEntry, ToolEnv
from geode.tools.spec import ToolCall
from tests.tools.conftest import probe_spec


def test_replay_returns_stored_result_without_running(make_rig) -> None:
    rig = make_rig()
    ctx = rig.ctx()
    call = ToolCall(id="tu-1", name="probe_write", input={"x": 1})
    first = rig.executor.execute(ctx, call)
    again = rig.executor.execute(ctx, call)
    assert len(rig.probes["probe_write"].calls) == 1
    assert again.content == first.content and again.executed is True and not again.is_error
    assert "tool.replayed" in [e.kind for e in rig.timeline()]


def test_conflict_same_operation_different_call(make_rig) -> None:
    rig = make_rig()
    ctx = rig.ctx()
    rig.executor.execute(ctx, ToolCall(id="tu-1", name="probe_write", input={"x": 1}))
    res = rig.executor.execute(ctx, ToolCall(id="tu-1", name="probe_write", input={"x": 2}))
    assert res.error_type == "effect_operation_conflict"
    assert len(rig.probes["probe_write"].calls) == 1


def test_deadline_marks_uncertain_and_says_may_still_run(make_rig) -> None:
    release = threading.Event()
    slow = probe_spec("slow_write", effect="mutate", resource_strategy="global:slow")
    rig = make_rig(extra_specs=(slow,))
    rig.probes["slow_write"].release = release
    ctx = rig.ctx(deadline_ms=int((time.time() + 0.5) * 1000))
    try:
        res = rig.executor.execute(ctx, ToolCall(id="tu-s", name="slow_write", input={}))
        assert res.error_type == "tool_timeout" and res.executed is None
        assert res.content["outcome_uncertain"] is True and "may still be running" in res.content["error"]
        receipt = rig.store.client.get_receipt(ctx.operation_id)
        assert receipt is not None and receipt.state.value == "uncertain"
        # the lock is held until the handler really ends
        assert rig.executor.locks.acquire(("global:slow",), 0.05) is None
    finally:
        release.set()
    assert _eventually(lambda: rig.executor.locks.acquire(("global:slow",), 0.05))
    # re-executing the same operation never runs the handler again
    again = rig.executor.execute(
        ctx.model_copy(update={"deadline_ms": None}), ToolCall(id="tu-s", name="slow_write")
    )
    assert again.error_type == "effect_outcome_uncertain" and len(rig.probes["slow_write"].calls) == 1


def _eventually(fn, timeout: float = 5.0):  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = fn()
        if got:
            if hasattr(got, "release"):
                got.release()
            return True
    return False


def test_unexpected_crash_of_an_effect_is_uncertain(make_rig) -> None:
    def boom(args, env):  # type: ignore[no-untyped-def]
        raise RuntimeError("disk on fire")

    spec = probe_spec("boom", effect="mutate", resource_strategy="global:boom")
    rig = make_rig(extra_specs=(spec,), handlers={"test:boom": HandlerEntry(boom)})
    ctx = rig.ctx()
    res = rig.executor.execute(ctx, ToolCall(id="b", name="boom"))
    assert res.error_type == "effect_outcome_uncertain"
    assert rig.store.client.get_receipt(ctx.operation_id).state.value == "uncertain"


def test_receipts_need_a_store(make_rig) -> None:
    rig = make_rig(records=None)
    res = rig.call("probe_write")
    assert res.error_type == "effect_receipt_unavailable" and not rig.probes["probe_write"].calls


def test_two_sessions_editing_one_file_serialize(make_rig) -> None:
    """Both edits go through the real edit_file; a wrapper proves the critical sections never overlap."""
    from geode.tools.builtin import files

    inside = {"now": 0, "max": 0}
    mu = threading.Lock()
    first_in = threading.Event()

    def slow_edit(args: dict, env: ToolEnv):  # type: ignore[type-arg]
        with mu:
            inside["now"] += 1
            inside["max"] = max(inside["max"], inside["now"])
        first_in.set()
        time.sleep(0.2)  # widen the window in which an unlocked second edit would overlap
        try:
            return files.edit_file(args, env)
        finally:
            with mu:
                inside["now"] -= 1

    rig = make_rig(handlers={"builtin:edit_file": HandlerEntry(slow_edit, ("file_path",))}, approvals=_Yes())
    target = rig.workspace / "shared.txt"
    target.write_text("alpha beta\n")
    out = []

    def edit(session: str, old: str, new: str) -> None:
        out.append(
            rig.call(
                "edit_file",
                {"file_path": "shared.txt", "old_string": old, "new_string": new},
                session_id=session,
            )
        )

    t1 = threading.Thread(target=edit, args=("s1", "alpha", "ALPHA"))
    t2 = threading.Thread(target=edit, args=("s2", "beta", "BETA"))
    t1.start()
    assert first_in.wait(5)
    t2.start()
    t1.join(10)
    t2.join(10)
    assert all(not r.is_error for r in out), out
    assert inside["max"] == 1
    assert target.read_text() == "ALPHA BETA\n"


class _Yes:
    def request(self, ctx, tool_name, detail, safety):  # type: ignore[no-untyped-def]
        return "y"
