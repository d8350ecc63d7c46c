"""Verify asks the store for uncertain receipts only when the turn's last save could not rule them out.

The save's reply says whether the session held an admitted or uncertain receipt when it was written
(``SaveResult.receipts_open``); with none, and only read-only calls sent since, Verify does not ask again
(RECEIPTS, issue 34 session 6). Anything else still lists them, and an uncertain receipt still escalates.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from geode.loop.checkpoint import Checkpointer
from geode.loop.state import TurnState
from geode.protocol import store as m
from geode.protocol.turns import TerminationReason
from geode.records.models import PendingBatch, PendingOperation, ReceiptIdentity
from tests.loop.conftest import Rig, store_calls, tool


def _admit(rig: Rig, session: str, op: str) -> None:
    ident = ReceiptIdentity(
        session_id=session, turn_id="old", step_id="st", tool_name="write", fingerprint="f"
    )
    rig.records.admit(op, ident, owner="executor#1", effect="external")


def test_a_read_only_turn_asks_no_receipt_list(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = store_calls(rig, monkeypatch)
    provider = rig.script({"tool_calls": [tool("read", "r1", key="a")]}, "done")
    result = rig.loop(provider).run_turn("vr-read", "turn-1", "go")
    assert result.termination_reason == TerminationReason.NATURAL and result.text == "done"
    assert m.RECEIPT_LIST not in calls and calls.count(m.CHECKPOINT_SAVE) == 3  # open, pending, final


def test_an_effect_call_since_the_last_save_keeps_the_list(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = store_calls(rig, monkeypatch)
    provider = rig.script({"tool_calls": [tool("write", "w1", text="A")]}, "written")
    result = rig.loop(provider).run_turn("vr-write", "turn-1", "go")
    assert result.termination_reason == TerminationReason.NATURAL and rig.effects == ["A"]
    assert calls.count(m.RECEIPT_LIST) == 1


def test_an_uncertain_receipt_from_before_still_escalates(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    _admit(rig, "vr-old", "op-old")
    rig.records.mark_uncertain("op-old", "test")
    _admit(rig, "vr-old0", "op-neighbour")  # another session, its key a prefix-neighbour: not this one's
    calls = store_calls(rig, monkeypatch)
    result = rig.loop(rig.script("hello")).run_turn("vr-old", "turn-1", "hi")
    assert result.termination_reason == TerminationReason.EXTERNAL_VERIFICATION_REQUIRED
    assert calls.count(m.RECEIPT_LIST) == 1


def test_an_admitted_receipt_turning_uncertain_after_the_save_escalates(rig: Rig) -> None:
    """The executor that admitted it dies while the model answers (after the open save): the save saw the
    receipt open, so Verify asks the store, and finds it uncertain."""
    _admit(rig, "vr-adm", "op-adm")
    inner = rig.records.save_checkpoint

    def save_then_die(save: Any) -> Any:
        out = inner(save)
        rig.records.owner_died("executor", 1)
        return out

    rig.records.save_checkpoint = save_then_die  # type: ignore[method-assign]
    result = rig.loop(rig.script("hello")).run_turn("vr-adm", "turn-1", "hi")
    assert result.termination_reason == TerminationReason.EXTERNAL_VERIFICATION_REQUIRED


def test_what_rules_the_receipts_out(rig: Rig) -> None:
    ckpt = Checkpointer(rig.records, "vr-unit")
    state = TurnState(session_id="vr-unit", turn_id="t1", user_text="q", cancel=threading.Event())
    assert not ckpt.receipts_clear(rig.plan)  # no save yet
    ckpt.save(state)
    assert ckpt.receipts_clear(rig.plan) and ckpt.receipts_clear(None)

    def batch(*names: str) -> PendingBatch:
        ops = tuple(PendingOperation(tool_use_id=n, operation_id=f"op-{n}", name=n) for n in names)
        return PendingBatch(turn_id="t1", step_id="s", operations=ops)

    ckpt.save(state, pending=batch("read", "fail"))
    assert ckpt.receipts_clear(rig.plan) and not ckpt.receipts_clear(None)  # reads only, told by the plan
    ckpt.save(state, pending=batch("read", "write"))
    assert not ckpt.receipts_clear(rig.plan)  # an effect sent after the save may admit one
    ckpt.save(state, pending=batch("unknown"))
    assert not ckpt.receipts_clear(rig.plan)  # a name the plan lacks counts as an effect
    ckpt.save(state)
    assert ckpt.receipts_clear(rig.plan)
    rig.records.fail_all = True
    assert ckpt.save(state, strict=False) is None
    assert not ckpt.receipts_clear(rig.plan)  # a failed save said nothing
    rig.records.fail_all = False
    _admit(rig, "vr-unit", "op-open")
    ckpt.save(state)
    assert not ckpt.receipts_clear(rig.plan)  # admitted: it may turn uncertain
    rig.records.commit("op-open", {"ok": True})
    ckpt.save(state)
    assert ckpt.receipts_clear(rig.plan)
