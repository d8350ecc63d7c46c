"""`geode schedule` against a served tree (the real scheduler child, the scripted model): add → list →
run-now → runs (the occurrence done, its lag and turn, `--show` the model's answer), a retried run-now with
the same request id is the same run, `geode status` lists the job, rm removes it; a bad input is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from tests.actors.tree_kit import geode, scripted_tree, wait_for
from tests.cli.scripted_chat import make_reply


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, Path]]:
    base = tmp_path_factory.mktemp("sched_cli")
    ws = base / "ws"
    ws.mkdir()
    with scripted_tree(base, make_reply(ws), ws, cwd=ws) as (home, _server):
        yield home, ws


def _json(home: GeodeHome, *args: str) -> Any:
    r = geode(home, "schedule", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_add_list_run_now_runs_through_the_daemon(tree: tuple[GeodeHome, Path]) -> None:
    home, ws = tree
    add = geode(
        home,
        "schedule",
        "add",
        "nightly",
        "--every",
        "1h",
        "--prompt",
        "nightly report",
        "--workspace",
        str(ws),
    )
    assert add.returncode == 0, add.stderr
    assert "added job nightly" in add.stdout
    listed = {j["name"]: j for j in _json(home, "list")["jobs"]}
    assert listed["nightly"]["next_instant"].endswith("Z") and listed["nightly"]["last"] is None

    first = _json(home, "run-now", "nightly", "--request-id", "retry-1")
    occ = first["occurrence"]["occurrence_id"]
    assert occ == "nightly@now:retry-1"

    def done() -> dict[str, Any] | None:
        runs = _json(home, "runs", "nightly")["runs"]
        row = next((r for r in runs if r["occurrence_id"] == occ), None)
        return row if row is not None and row["outcome"] == "done" else None

    row = wait_for(done, timeout_s=30.0, what="the run-now occurrence done in `geode schedule runs`")
    assert row is not None
    assert row["outcome_text"] == "done ok (natural)" and row["lag_s"] is not None and row["lag_s"] >= 0
    assert row["turn_id"] == first["occurrence"]["turn_id"]

    again = _json(home, "run-now", "nightly", "--request-id", "retry-1")  # a retried command: one run
    assert again["duplicate"] and again["occurrence"]["occurrence_id"] == occ
    assert [r["occurrence_id"] for r in _json(home, "runs", "nightly")["runs"]].count(occ) == 1

    shown = _json(home, "runs", "--show", occ)
    assert "echo:" in shown["answer"] and "nightly report" in shown["answer"], shown

    status = geode(home, "status")
    assert status.returncode == 0, status.stderr
    line = next(ln for ln in status.stdout.splitlines() if ln.strip().startswith("nightly"))
    assert "done ok (natural)" in line

    bad = geode(home, "schedule", "add", "bad1", "--cron", "0 25 * * *", "--prompt", "x")
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1
    gone = geode(home, "schedule", "rm", "nightly")
    assert gone.returncode == 0, gone.stderr
    assert [j["name"] for j in _json(home, "list")["jobs"]] == []
