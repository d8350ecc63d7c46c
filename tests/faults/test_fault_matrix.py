"""The fault matrix (docs/faults.md): every injection point by the child that dies there, on a real tree, each
cell asserting DESIGN.md §5 — the effect ran at most once, the receipt is committed, or uncertain exactly when
the effect may have begun, a call that never began is reported as not run, and the session goes on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.faults.matrix_kit import run_cell


@dataclass(frozen=True)
class Cell:
    child: str  # the child the fault kills (a glob on its name)
    point: str
    effects: int  # how often the faulted turn's effect ran (never more than once)
    receipt: str | None  # its receipt once the child is back: None (never admitted), committed, uncertain
    tool_error: str | None  # the faulted call's error as `geode ask --json` reports it
    outcome: str = "applied"  # the operator's verdict on an uncertain receipt (what really happened)


CELLS = [
    Cell("executor", "executor.before_admit", 1, "committed", None),  # sent again to the next incarnation
    Cell("executor", "executor.after_admit", 0, "uncertain", "effect_outcome_uncertain", "not-applied"),
    Cell("executor", "executor.in_handler", 1, "uncertain", "effect_outcome_uncertain"),
    Cell("executor", "executor.after_handler", 1, "uncertain", "effect_outcome_uncertain"),
    Cell("executor", "executor.after_commit", 1, "committed", None),
    Cell("store", "store.after_admit", 1, "committed", None),
    Cell("store", "store.after_commit", 1, "committed", None),
    Cell("loop-*", "loop.after_pending_checkpoint", 1, "committed", None),
    Cell("loop-*", "loop.before_completed_checkpoint", 1, "committed", None),
    Cell("lanes", "lanes.after_turn_stored", 1, "committed", None),
]


@pytest.mark.parametrize(
    "cell", CELLS, ids=[f"{c.child.rstrip('-*')}-{c.point.split('.')[1]}" for c in CELLS]
)
def test_fault_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cell: Cell) -> None:
    seen = run_cell(tmp_path, monkeypatch, cell.child, cell.point, cell.outcome)
    why = f"{cell.point}: {seen}"
    print(f"\n{cell.point}: {seen.took}")
    assert seen.effects_first == cell.effects, why  # at most once, and exactly as often as it began
    assert [r["state"] for r in seen.receipts] == ([cell.receipt] if cell.receipt else []), why
    assert [t.get("error") for t in seen.first.get("tool_calls", [])] == [cell.tool_error], why
    if cell.receipt == "uncertain":  # listed, the session waits for the operator, who reconciles it
        assert seen.uncertain_listed == [seen.receipts[0]["operation_id"]], why
        assert seen.first_rc == 1 and seen.first["termination_reason"] == "external_verification_required"
        assert seen.status_before == "paused", why
        assert seen.reconcile_rc == 0 and "reconciled as" in seen.reconcile_out, why
    else:  # nothing to reconcile: the turn ended normally and `geode reconcile` says so
        assert seen.uncertain_listed == [] and seen.first_rc == 0, why
        assert seen.first["termination_reason"] == "natural" and seen.status_before != "paused", why
        if cell.receipt == "committed":
            assert seen.reconcile_rc == 1 and "nothing to reconcile" in seen.reconcile_out, why
    assert seen.listed_after == [], why
    assert seen.second_rc == 0 and seen.second["termination_reason"] == "natural", why  # the session goes on
    assert seen.effects_second == 1, why
