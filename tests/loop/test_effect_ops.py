"""An assistant batch's operation ids ride its metadata as rows, not as a map keyed by tool_use id: msgpack
interns every map key it unpacks and CPython 3.12's interned strings are immortal (each tool call's id
stayed in the store for good: the soak's growth). Records written before keep the map: both read the same."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

import geode.loop.batch as batch
from actors.cli.turn_tools import turn_tool_calls
from geode.conversation import ToolUseBlock
from geode.loop.batch import assistant_message
from geode.loop.effect_ops import effect_operations, not_unicode_calls
from geode.loop.snapshot import StepSnapshot
from tests.loop.conftest import Rig
from tests.loop.test_one_save_per_round import (
    test_a_call_refused_for_a_lone_surrogate_is_answered_by_the_resume_never_sent as _surrogate,
)
from tests.loop.test_resume import test_mid_batch_crash_is_repaired_without_running_anything_twice as _crash

SNAP = StepSnapshot(
    session_id="s", turn_id="t-1", step_index=2, round_index=1, model="m", provider="p", adapter="a"
)


def _map_keys(obj: Any) -> set[str]:
    if isinstance(obj, dict):
        return set(obj) | {k for v in obj.values() for k in _map_keys(v)}
    if isinstance(obj, (list, tuple)):
        return {k for v in obj for k in _map_keys(v)}
    return set()


def test_a_batch_message_carries_no_tool_use_id_as_a_map_key() -> None:
    calls = tuple(ToolUseBlock(id=f"toolu_{i}", name="read", input={"path": "x"}) for i in range(3))
    msg = assistant_message(SNAP, "", calls, 2)  # the third is beyond the cap: no operation id
    wire = msgpack.unpackb(msgpack.packb(msg.model_dump(mode="json")))
    assert not {c.id for c in calls} & _map_keys(wire["metadata"])  # a map keyed by them on HEAD
    ops = effect_operations(wire["metadata"])
    assert list(ops) == ["toolu_0", "toolu_1"]
    assert ops["toolu_1"]["operation_id"] == SNAP.operation_id("toolu_1")
    assert ops["toolu_1"]["step_id"] == "t-1:step-2"


def test_the_old_map_shape_reads_as_the_rows() -> None:
    rows = {"effect_operations": [{"tool_use_id": "a", "operation_id": "op-a", "step_id": "t:step-1"}]}
    old = {"effect_operations": {"a": {"operation_id": "op-a", "step_id": "t:step-1"}}}
    assert {k: v["operation_id"] for k, v in effect_operations(rows).items()} == {"a": "op-a"}
    assert {k: v["operation_id"] for k, v in effect_operations(old).items()} == {"a": "op-a"}
    assert effect_operations({}) == {} == effect_operations({"effect_operations": [{"x": 1}, "junk"]})


@pytest.mark.parametrize("shape", ["rows", "map"])
def test_a_turns_tool_calls_are_found_in_either_shape(shape: str) -> None:
    calls = (ToolUseBlock(id="toolu_a", name="read", input={}),)
    meta = assistant_message(SNAP, "", calls).metadata
    if shape == "map":
        meta = {**meta, "effect_operations": {r["tool_use_id"]: r for r in meta["effect_operations"]}}
    msg = {"role": "assistant", "content": [c.model_dump() for c in calls], "metadata": meta}
    assert [r["id"] for r in turn_tool_calls([msg], "t-1")] == ["toolu_a"]
    assert turn_tool_calls([msg], "t-2") == []


def test_a_batch_saved_in_the_old_shape_is_repaired_as_before(fake_rig: Rig, monkeypatch) -> None:
    def old_shape(ops: Any) -> dict[str, dict[str, str]]:
        return {t: {"operation_id": op, "step_id": step} for t, op, step in ops}

    monkeypatch.setattr(batch, "effect_rows", old_shape)
    _crash(fake_rig)


def test_the_calls_refused_for_a_lone_surrogate_are_rows_too() -> None:
    calls = tuple(ToolUseBlock(id=f"toolu_{i}", name="read", input={"path": "x"}) for i in range(2))
    msg = assistant_message(SNAP, "", calls, not_unicode={"toolu_1": "input.path"})
    wire = msgpack.unpackb(msgpack.packb(msg.model_dump(mode="json")))
    assert not {c.id for c in calls} & _map_keys(wire["metadata"])  # a map keyed by toolu_1 before
    assert not_unicode_calls(wire["metadata"]) == {"toolu_1": "input.path"}
    assert not_unicode_calls({"not_unicode": {"toolu_1": "input.path"}}) == {"toolu_1": "input.path"}  # old
    assert not_unicode_calls({}) == {} == not_unicode_calls({"not_unicode": [{"x": 1}, "junk"]})


def test_a_refused_call_saved_in_the_old_shape_is_answered_by_the_resume(fake_rig: Rig, monkeypatch) -> None:
    monkeypatch.setattr(batch, "not_unicode_rows", dict)
    _surrogate(fake_rig, "during the tools")
