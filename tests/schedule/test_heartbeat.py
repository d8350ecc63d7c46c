"""The built-in heartbeat (``[schedule.heartbeat]``) in the driver, on a fake clock over a real LMDB store:
its prompt is its workspace's HEARTBEAT.md read at each run; no file: not run, ``done`` saying so; an answer
of exactly HEARTBEAT_OK posts nothing and the outcome says it was quiet; any other answer is posted."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from geode.records.schedule_models import OccurrenceRow
from geode.schedule.driver import Driver, reply_operation_id
from geode.schedule.heartbeat import declared_jobs, read_prompt
from geode.schedule.jobs import Job
from geode.schedule.outcomes import Done
from geode.schedule.ports import TurnEnd
from geode.schedule.settings import ScheduleSection
from tests.schedule.test_driver import T0, FakeLanes, Rig, kinds, rig  # noqa: F401 (rig: the fixture)


@dataclass
class PromptLanes(FakeLanes):
    prompts: list[str] = field(default_factory=list)

    def submit(self, job: Job, row: OccurrenceRow) -> None:
        self.prompts.append(job.prompt)
        super().submit(job, row)


def test_the_heartbeat_is_quiet_on_heartbeat_ok_and_posts_anything_else(rig: Rig, tmp_path: Path) -> None:  # noqa: F811
    ws = tmp_path / "beat"
    ws.mkdir()
    section = ScheduleSection.model_validate(
        {"heartbeat": {"enabled": True, "every": "1m", "deliver": "telegram:42", "workspace": str(ws)}}
    )
    (beat,) = declared_jobs(section)
    lanes = rig.lanes = PromptLanes()
    d = Driver(
        rig.ledger, lanes, rig.chat, rig.clock.now, "scheduler#1:1", heartbeat=lambda j: read_prompt(ws)
    )
    d.start()
    d.define(beat, declarative=True)

    def run(answer: str | None) -> OccurrenceRow:
        rig.clock.advance(seconds=60)
        d.tick()
        if answer is not None:
            lanes.ended_turns[lanes.admitted[-1]] = TurnEnd(termination_reason="natural", text=answer)
            d.tick()
        return rig.ledger.runs("heartbeat").occurrences[0]

    row = run(None)  # no HEARTBEAT.md: nobody is asked, nothing posted, the outcome says why
    assert row.instant == T0 + timedelta(seconds=60) and kinds(row) == ["due", "done"]
    assert (
        isinstance(row.outcome, Done)
        and row.outcome.result == "ok"
        and "no HEARTBEAT.md" in row.outcome.reason
    )
    assert lanes.submits == [] and rig.chat.posts == {}

    (ws / "HEARTBEAT.md").write_text("Check the disk; answer HEARTBEAT_OK if all is well.\n")
    row = run("  HEARTBEAT_OK\n")
    assert lanes.prompts == ["Check the disk; answer HEARTBEAT_OK if all is well.\n"]
    assert kinds(row) == ["due", "done"] and isinstance(row.outcome, Done) and row.outcome.result == "ok"
    assert "quiet" in row.outcome.reason and "nothing posted" in row.outcome.reason
    assert rig.chat.posts == {}

    row = run("The disk is 97% full.")
    assert kinds(row) == ["due", "done"] and isinstance(row.outcome, Done)
    assert row.outcome.reason == "natural"
    assert rig.chat.posts == {reply_operation_id(row.turn_id): "The disk is 97% full."}

    row = run("HEARTBEAT_OK, but the disk is 97% full.")  # not exactly HEARTBEAT_OK: posted
    assert len(rig.chat.posts) == 2 and rig.chat.posts[reply_operation_id(row.turn_id)].startswith(
        "HEARTBEAT_OK,"
    )


def test_the_heartbeat_is_off_by_default_and_its_name_is_reserved() -> None:
    assert declared_jobs(ScheduleSection()) == []
    with pytest.raises(ValidationError, match=r"reserved for \[schedule.heartbeat\]"):
        ScheduleSection.model_validate({"jobs": [{"name": "heartbeat", "every": 60, "prompt": "x"}]})
