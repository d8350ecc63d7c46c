"""Settle by observation, in one process: write_file/edit_file record at admission the target's hash and the
intended one; a receipt left uncertain (the handler crashed) is reconciled applied when the file holds the
intended text, not applied when it still holds the old one, and stays uncertain for anything else."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from geode.tools.builtin import files
from geode.tools.builtin.file_observation import observe_edit
from geode.tools.handlers import HandlerEntry, ToolEnv
from geode.tools.observation import settle_uncertain


class _Yes:
    def request(self, ctx, tool_name, detail, safety):  # type: ignore[no-untyped-def]
        return "y"


def _crashing(fn: Callable[[dict[str, Any], ToolEnv], Any], then: Callable[[Path], None] | None) -> Any:
    """The real handler (or none), then something else to the file, then a crash: the outcome is unknown."""

    def handler(args: dict[str, Any], env: ToolEnv) -> Any:
        if then is not None:
            fn(args, env)
            then(env.workspace / args["file_path"])
        raise RuntimeError("the executor died here")

    return handler


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    ("landed", "after", "outcome"),
    [
        (True, None, "applied"),  # the edit landed
        (False, None, "not_applied"),  # it never touched the file
        (True, "someone else's text\n", None),  # the file holds neither: a person decides
    ],
)
def test_an_uncertain_edit_is_settled_by_looking(
    make_rig, landed: bool, after: str | None, outcome: str
) -> None:  # type: ignore[no-untyped-def]
    def then(path: Path) -> None:
        if after is not None:
            path.write_text(after)

    handler = _crashing(files.edit_file, then if landed else None)
    entry = HandlerEntry(handler, ("file_path",), observe=observe_edit)
    rig = make_rig(approvals=_Yes(), handlers={"builtin:edit_file": entry})
    (rig.workspace / "notes.txt").write_text("alpha beta\n")
    args = {"file_path": "notes.txt", "old_string": "beta", "new_string": "gamma"}
    res = rig.call("edit_file", args, operation_id="op-edit")
    assert res.error_type == "effect_outcome_uncertain", res
    records = rig.store.client
    receipt = records.get_receipt("op-edit")
    assert receipt.state.value == "uncertain" and receipt.observation is not None
    assert (receipt.observation.before, receipt.observation.intended) == (
        _sha("alpha beta\n"),
        _sha("alpha gamma\n"),
    )

    settled = settle_uncertain(records, "executor")
    receipt = records.get_receipt("op-edit")
    if outcome is None:
        assert settled == [] and receipt.state.value == "uncertain"
        return
    assert receipt.state.value == "reconciled" and receipt.outcome == outcome
    assert receipt.reconciled_by == "observation" and receipt.observation.observed is not None
    assert settle_uncertain(records, "another-host/executor") == []  # another host's files are not here
