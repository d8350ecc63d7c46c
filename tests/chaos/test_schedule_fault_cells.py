"""Fault cells of a scheduled job on one real `geode serve` tree: an operator job ``every 1s`` (one run_bash
effect, its answer delivered to a bound Telegram chat) while GEODE_FAULTS SIGKILLs, once each, a child at
every boundary of an occurrence: due recorded (scheduler), turn submitted (scheduler; lanes with the turn
stored), the turn's batch run but not checkpointed (a loop worker), the reply receipt admitted (executor;
the store after an admission and after the reply's own admission, `store.after_reply_admit`; the scheduler
told the reply is admitted and its post unknown, `scheduler.after_reply_uncertain`), the reply posted
(messengers before answering; executor before the commit; the store with the reply's receipt committed,
`store.after_reply_commit`), a receipt committed (store). Each fault fires once per home, on successive
occurrences (``nth``); afterwards every instant has exactly one terminal outcome in `geode schedule runs
--json`, no effect or post happened twice, and each ``uncertain`` reply was admitted by an incarnation that
died (tests/chaos/schedule.py's checker). The scheduler is also killed where it learns the turn ended (its
outcome not recorded), before it asks the executor for the reply, and after the executor said the reply
posted (the next incarnation asks again under the same operation id: replayed, posted once). The full grid
(15 cells), ~35 s, runs with the slow chaos runs (GEODE_SLOW=1); without it one cell, the scheduler killed
with the reply posted and its outcome not recorded, runs on the same fixture in CI (the executor cell is in
tests/chaos/test_chaos_schedule.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import children, scripted_home, serve, stop, wait_for
from tests.chaos.driver import Kill
from tests.chaos.rig import MarkerModel
from tests.chaos.schedule import (
    JobVerdict,
    check_job,
    job_config,
    job_receipts,
    pause_job,
    read_effects,
    runs_json,
    settle_job,
)

CHAT = -100779
CELLS = {  # point: the child glob and the nth time it reaches it
    "scheduler.after_due": ("scheduler", 2),
    "scheduler.after_submit": ("scheduler", 3),
    "scheduler.after_turn_end": ("scheduler", 3),
    "scheduler.before_reply": ("scheduler", 3),
    "scheduler.after_reply_posted": ("scheduler", 3),
    "scheduler.after_reply_uncertain": ("scheduler", 1),
    "lanes.after_turn_stored": ("lanes", 4),
    "loop.before_completed_checkpoint": ("loop-*", 3),
    "executor.reply_after_admit": ("executor", 2),
    "executor.reply_after_send": ("executor", 3),
    "messengers.after_post": ("messengers", 3),
    "store.after_admit": ("store", 12),
    "store.after_commit": ("store", 20),
    "store.after_reply_admit": ("store", 3),
    "store.after_reply_commit": ("store", 5),
}
SLOW = bool(os.environ.get("GEODE_SLOW"))
CI_CELL = "scheduler.after_reply_posted"  # the one cell of the normal suite
ARMED = CELLS if SLOW else {CI_CELL: ("scheduler", 2)}
FAULTS = ",".join(f"{child}@{point}:kill:{nth}" for point, (child, nth) in ARMED.items())


@dataclass
class Cells:
    home: GeodeHome
    api: LocalBotApi
    model: MarkerModel
    base: Path


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cells]:
    base = tmp_path_factory.mktemp("sched_cells")
    model = MarkerModel(base / "markers.log")
    with LocalBotApi() as api, ScriptedServer(model) as server:
        binding = (
            f'[messengers.telegram]\nbase_url = "{api.base_url}"\npoll_timeout_s = 1\n'
            f'[[messengers.bindings]]\nplatform = "telegram"\nchannel_id = "{CHAT}"\n'
            f'[tools]\nroots = ["{base}"]\n'
        )
        home = scripted_home(base, server, extra=binding + job_config(base, CHAT))
        with home.env_file.open("a") as f:
            f.write(f"TELEGRAM_BOT_TOKEN={api.token}\n")
        try:
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("GEODE_FAULTS", FAULTS)
                serve(home)
            yield Cells(home, api, model, base)
        finally:
            stop(home)


def _dead_incarnations(home: GeodeHome) -> list[Kill]:
    """Every incarnation before each child's current one (the faults are this tree's only kills)."""
    kids = children(home)
    return [Kill(0.0, 0.0, name, 0, i) for name, c in kids.items() for i in range(1, c.incarnation)]


def _fired(home: GeodeHome) -> set[str]:
    fired = home.root / "faults"
    return {p.name.removesuffix(".fired") for p in fired.glob("*.fired")} if fired.exists() else set()


def _check_after_every_cell(cells: Cells, timeout_s: float) -> tuple[JobVerdict, dict[str, Any]]:
    """Wait until every armed cell fired, pause the job, let it settle, and run the chaos checker."""
    home = cells.home
    missing = lambda: sorted(set(ARMED) - _fired(home))  # noqa: E731
    try:
        wait_for(lambda: not missing() or None, timeout_s, what="every fault cell fired")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; never fired: {missing()}") from None
    end = datetime.now(UTC)
    created, why = pause_job(home, end, 30.0)  # the scheduler goes on deciding after every kill
    assert created is not None, why
    assert settle_job(home, 30.0) == ""
    runs = runs_json(home)
    turns = [r["turn_id"] for r in runs["runs"] if r["type"] == "occurrence"]
    v = check_job(
        runs,
        (created + timedelta(seconds=1), end),
        read_effects(cells.model.job_effects),
        dict(cells.model.calls),
        job_receipts(home, turns),
        cells.api.posts(CHAT),
        _dead_incarnations(home),
    )
    print(v.line(), v.findings)
    assert v.violations == [], v.violations
    return v, runs


@pytest.mark.skipif(SLOW, reason="GEODE_SLOW=1 runs this cell within the full grid")
def test_scheduler_killed_with_the_reply_posted_and_its_outcome_not_recorded_posts_it_once(
    cells: Cells,
) -> None:
    v, runs = _check_after_every_cell(cells, 40.0)
    assert children(cells.home)["scheduler"].incarnation == 2  # the fault killed it once
    done = [r for r in runs["runs"] if r["type"] == "occurrence" and r["outcome"] == "done"]
    assert len(done) >= 2, v.line()  # the killed one among them: asked again, replayed, not posted again
    assert v.posts == len(done), (v.line(), [r["outcome_text"] for r in runs["runs"]])  # each posted once


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("GEODE_SLOW"), reason="every fault cell of a job, ~40 s: GEODE_SLOW=1")
def test_every_boundary_killed_once_leaves_each_instant_one_outcome_and_no_effect_or_post_twice(
    cells: Cells,
) -> None:
    v, _ = _check_after_every_cell(cells, 90.0)
    assert v.outcomes["done"] >= 5, v.line()
    assert v.outcomes["uncertain"] >= 1, v.line()  # the reply killed between its admit and its commit
