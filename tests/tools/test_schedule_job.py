"""schedule_job through the executor against a fake scheduler endpoint: the ``schedule.*`` request it sends,
the approval text a person sees, where it is refused, and the one-line errors that store nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from geode.messengers.config import MessengerBinding
from geode.protocol import schedule as sched
from geode.protocol.dispatch import Dispatch
from geode.protocol.errors import BadRequest, Unavailable
from geode.protocol.transport import LocalTransport
from geode.records.models import TurnRecord
from geode.records.schedule_models import JobCursor, JobEntry, JobRecord
from geode.tools.builtin.schedule_job import BusScheduler, SchedulerLost
from geode.tools.schedule_rule import ScheduleRule
from geode.tools.spec import SafetyPolicy, ToolContext

NOW = datetime(2026, 12, 4, 22, 0, tzinfo=UTC)  # a Friday, 23:00 in Berlin
CHAT, OTHER, UNBOUND = "telegram:-100123", "telegram:-100456", "telegram:-100999"
BINDINGS = [
    MessengerBinding(platform="telegram", channel_id="-100123", allow_schedule=True, send_to=[OTHER]),
    MessengerBinding(platform="telegram", channel_id="-100456"),  # allow_schedule: the default (false)
]


class FakeScheduler:
    """The ``scheduler`` endpoint: records every request; ``fail`` makes it refuse or be down."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, Any]] = []
        self.fail: Exception | None = None
        self.jobs: dict[str, dict[str, Any]] = {
            "ops-report": {
                "name": "ops-report",
                "cron": "0 6 * * *",
                "prompt": "operator secret",
                "origin": "operator",
            }
        }

    def _view(self, name: str) -> sched.JobView:
        record = JobRecord(job_id=name, definition=self.jobs[name], created_at=NOW, updated_at=NOW)
        return sched.JobView(entry=JobEntry(job=record, cursor=JobCursor(job_id=name)), next_instant="x")

    def _note(self, type_: str, body: Any) -> None:
        self.requests.append((type_, body))
        if self.fail is not None:
            raise self.fail

    def add(self, b: sched.AddJob, r: Any) -> sched.AddReply:
        self._note(sched.ADD, b)
        self.jobs[b.job["name"]] = b.job
        return sched.AddReply(job=self._view(b.job["name"]))

    def list_jobs(self, b: sched.ListJobs, r: Any) -> sched.JobsReply:
        self._note(sched.LIST, b)
        return sched.JobsReply(jobs=[self._view(n) for n in self.jobs])

    def show(self, b: sched.ShowJob, r: Any) -> sched.ShowReply:
        self._note(sched.SHOW, b)
        return sched.ShowReply(job=self._view(b.name), runs={"occurrences": [], "missed": []})

    def remove(self, b: sched.RemoveJob, r: Any) -> sched.RemoveReply:
        self._note(sched.REMOVE, b)
        return sched.RemoveReply(removed=self.jobs.pop(b.name, None) is not None)

    def dispatch(self) -> Dispatch:
        routes: dict[str, Any] = {
            sched.ADD: self.add,
            sched.LIST: self.list_jobs,
            sched.SHOW: self.show,
            sched.REMOVE: self.remove,
        }
        return Dispatch("fake scheduler", routes)

    def types(self) -> list[str]:
        return [t for t, _ in self.requests]


class Approver:
    """Answers every prompt with ``answer`` and keeps what it was shown."""

    def __init__(self, answer: str = "y") -> None:
        self.answer = answer
        self.shown: list[str] = []

    def request(self, ctx: ToolContext, tool_name: str, detail: str, safety: SafetyPolicy) -> str:
        self.shown.append(detail)
        return self.answer


class ChatTurns:
    """The store's turn records as the messengers child writes them: every turn is chat -100123's."""

    def get_turn(self, turn_id: str) -> TurnRecord:
        return TurnRecord(
            turn_id=turn_id,
            session_id="s1",
            origin="messengers",
            input={"messenger": {"platform": "telegram", "channel_key": "-100123"}},
        )


@pytest.fixture
def kit(make_rig):  # type: ignore[no-untyped-def]
    def make(answer: str = "y", turns: Any = None) -> tuple[Any, FakeScheduler, Approver]:
        fake, approver = FakeScheduler(), Approver(answer)
        transport = LocalTransport({"scheduler": fake.dispatch()}, sender="executor#1")
        rig = make_rig(services={"scheduler": BusScheduler(transport)}, approvals=approver)
        rig.executor.schedule_rule = ScheduleRule(BINDINGS, turns, tools=rig.plan.specs, clock=lambda: NOW)
        return rig, fake, approver

    return make


def _create(**kw: Any) -> dict[str, Any]:
    """A create call's arguments; a None value leaves that argument out."""
    base = {"action": "create", "name": "berlin-morning", "cron": "30 7 * * *", "tz": "Europe/Berlin"}
    return {k: v for k, v in {**base, "prompt": "Summarise the logs", **kw}.items() if v is not None}


def test_create_asks_then_sends_schedule_add_as_the_models_job_in_the_sessions_workspace(kit) -> None:
    rig, fake, approver = kit()
    res = rig.call("schedule_job", _create(tools=["read_file", "web_fetch"], deliver=CHAT))
    assert not res.is_error, res.content
    assert len(approver.shown) == 1 and fake.types() == [sched.ADD]
    body = fake.requests[0][1]
    assert body.origin == "model" and body.workspace == str(rig.workspace) and body.session_id == "s1"
    job = body.job
    assert (job["name"], job["cron"], job["tz"], job["origin"]) == (
        "berlin-morning",
        "30 7 * * *",
        "Europe/Berlin",
        "model",
    )
    assert job["allowed_tools"] == ["read_file", "web_fetch"] and job["workspace"] == str(rig.workspace)
    assert job["deliver"] == {"platform": "telegram", "channel_id": "-100123"}
    assert res.content["created"] == "berlin-morning" and res.content["origin"] == "model"


def test_the_approval_shows_schedule_next_three_instants_prompt_tools_workspace_and_delivery(kit) -> None:
    rig, fake, approver = kit(answer="n")
    prompt = "Report\x1b]52;c;ZXZpbA==\x07 now\nthen \u202eexit"  # a clipboard write, a newline, bidi
    res = rig.call("schedule_job", _create(prompt=prompt, tools=["read_file"], deliver=CHAT))
    assert res.is_error and res.error_type == "permission_denied"
    assert fake.requests == []  # denied: nothing reached the scheduler
    text = approver.shown[0]
    assert 'schedule: cron "30 7 * * *" in time zone "Europe/Berlin"' in text
    # the next three instants in the job's zone (07:30 CET = 06:30 UTC), after the clock's Friday 23:00
    assert (
        "2026-12-05T07:30:00+01:00 (CET), 2026-12-06T07:30:00+01:00 (CET), 2026-12-07T07:30:00+01:00" in text
    )
    assert '"Report\\u001b]52;c;ZXZpbA==\\u0007 now\\nthen \\u202eexit"' in text  # whole, escaped
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert 'tools: ["read_file"]' in text and f'workspace: "{rig.workspace}"' in text
    assert f'delivery: "{CHAT}"' in text


def test_an_every_and_an_at_job_show_their_own_instants(kit) -> None:
    rig, _fake, approver = kit(answer="n")
    rig.call("schedule_job", _create(cron=None, every="6h", tz="UTC"))
    rig.call("schedule_job", _create(cron=None, at="2026-12-24T18:00:00", tz="America/New_York"))
    every, at = approver.shown
    assert "every 21600 s" in every and "2026-12-05T04:00:00+00:00 (UTC), 2026-12-05T10:00:00+00:00" in every
    assert "tools: DAEMON's list" in every and "delivery: none" in every
    assert "next 3: 2026-12-24T18:00:00-05:00 (EST)" in at


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (_create(cron="61 * * * *"), "cron = '61 * * * *'"),
        (_create(cron="* * *"), "5 fields"),
        (_create(tz="Mars/Olympus"), "unknown time zone 'Mars/Olympus'"),
        (_create(cron=None, at="2026-12-01T09:00:00"), "is in the past"),
        (_create(deliver=UNBOUND), "unknown delivery chat telegram:-100999"),
        (_create(tools=["read_file", "run_bash"]), "cannot allow run_bash"),
        (_create(tools=["no_such_tool"]), "no such tool: no_such_tool"),
        (_create(cron=None), "exactly one of cron, every, at"),
    ],
)
def test_bad_input_is_one_line_nobody_is_asked_and_nothing_is_stored(kit, args: dict, says: str) -> None:
    rig, fake, approver = kit()
    res = rig.call("schedule_job", args)
    assert res.is_error and res.error_type == "invalid_tool_input", res.content
    error = res.content["error"]
    assert says in error and "\n" not in error and error.endswith("Nothing was scheduled.")
    assert approver.shown == [] and fake.requests == []


@pytest.mark.parametrize(
    ("fail", "says"),
    [
        (Unavailable("scheduler restarting"), "The scheduler is not running (scheduler restarting)"),
        (BadRequest("schedule job 'berlin-morning' already exists"), "The scheduler refused: schedule job"),
    ],
)
def test_a_scheduler_that_is_down_or_refuses_is_one_line(kit, fail: Exception, says: str) -> None:
    rig, fake, _approver = kit()
    fake.fail = fail
    res = rig.call("schedule_job", _create())
    assert res.is_error and says in res.content["error"], res.content
    assert "\n" not in res.content["error"] and "was not created" in res.content["error"]


class _LostPort:
    """The executor's scheduler port when the child exits with the request in flight (on_exit_failer)."""

    def call(self, type_: str, body: Any) -> dict[str, Any]:
        raise SchedulerLost("scheduler#1 exited")


def test_a_scheduler_lost_mid_request_says_the_outcome_is_unknown(make_rig) -> None:
    rig = make_rig(services={"scheduler": _LostPort()}, approvals=Approver())
    res = rig.call("schedule_job", _create())
    error = res.content["error"]
    assert (
        res.is_error and "The scheduler exited: whether job 'berlin-morning' was created is unknown" in error
    )
    assert "was not created" not in error and "\n" not in error


def test_list_asks_nobody_and_shows_an_operator_jobs_prompt_to_nobody(kit) -> None:
    rig, _fake, approver = kit()
    assert not rig.call("schedule_job", _create()).is_error
    res = rig.call("schedule_job", {"action": "list"})
    assert not res.is_error and len(approver.shown) == 1  # the create only
    jobs = {j["name"]: j for j in res.content["jobs"]}
    assert jobs["berlin-morning"]["prompt"] == "Summarise the logs" and "prompt" not in jobs["ops-report"]


def test_cancel_asks_and_removes_only_a_job_the_model_made(kit) -> None:
    rig, fake, approver = kit()
    rig.call("schedule_job", _create())
    res = rig.call("schedule_job", {"action": "cancel", "name": "ops-report"})
    assert res.is_error and "only `geode schedule rm` removes it" in res.content["error"]
    res = rig.call("schedule_job", {"action": "cancel", "name": "berlin-morning"})
    assert not res.is_error and res.content == {"cancelled": "berlin-morning", "removed": True}
    assert [t for t in fake.types() if t == sched.REMOVE] == [sched.REMOVE]
    assert 'schedule_job cancel "berlin-morning"' in approver.shown[-1]


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("HEADLESS", "unavailable under headless policy"),
        ("AUTOMATION", "unavailable under headless policy"),
        ("DAEMON", "unavailable under headless policy"),  # a DAEMON turn without a chat
    ],
)
def test_refused_where_nobody_may_schedule(kit, mode: str, says: str) -> None:
    rig, fake, approver = kit()
    res = rig.call("schedule_job", _create(), mode=mode)
    assert res.is_error and says in res.content["error"], res.content
    assert approver.shown == [] and fake.requests == []


def test_an_automation_job_naming_schedule_job_still_cannot_schedule(kit) -> None:
    rig, fake, approver = kit()
    res = rig.call("schedule_job", _create(), mode="AUTOMATION", granted_tools=("schedule_job",))
    assert res.is_error and "unavailable under headless policy" in res.content["error"]  # no grant for it
    assert fake.requests == [] and approver.shown == []


def test_a_chat_turn_schedules_only_where_its_binding_allows_and_delivers_only_to_its_chats(kit) -> None:
    rig, fake, approver = kit(turns=ChatTurns())
    chat = {"mode": "DAEMON", "origin": "messengers"}
    res = rig.call("schedule_job", _create(deliver=UNBOUND.replace("999", "456")), **chat)  # its send_to
    assert not res.is_error, res.content
    assert len(approver.shown) == 1 and fake.types() == [sched.ADD]
    rig.executor.schedule_rule.use_bindings([BINDINGS[0].model_copy(update={"send_to": []}), BINDINGS[1]])
    res = rig.call("schedule_job", _create(name="elsewhere", deliver=OTHER), **chat)
    assert res.is_error and "may deliver only to its own chat (telegram:-100123)" in res.content["error"]
    rig.executor.schedule_rule.use_bindings([BINDINGS[0].model_copy(update={"allow_schedule": False})])
    res = rig.call("schedule_job", _create(name="not-here"), **chat)
    assert res.is_error and res.error_type == "schedule_job_denied"
    assert "does not set allow_schedule = true" in res.content["error"]
    assert fake.types() == [sched.ADD] and len(approver.shown) == 1


def test_without_a_scheduler_the_model_is_told_in_one_line(make_rig) -> None:
    rig = make_rig(approvals=Approver())
    res = rig.call("schedule_job", {"action": "list"})
    assert (
        res.is_error and res.error_type == "tool_unavailable" and "only `geode serve`" in res.content["error"]
    )


def test_the_workspace_is_the_sessions(kit, tmp_path: Path) -> None:
    rig, fake, approver = kit()
    other = tmp_path / "project"
    other.mkdir()
    rig.call("schedule_job", _create(), workspace=str(other))
    assert fake.requests[0][1].workspace == str(other.resolve()) and str(other) in approver.shown[0]


def _model_job(name: str, chat: str) -> dict[str, Any]:
    platform, _, channel = chat.partition(":")
    deliver = {"platform": platform, "channel_id": channel}
    return {"name": name, "every": 60, "prompt": f"{name} secret", "origin": "model", "deliver": deliver}


def test_a_chat_lists_and_cancels_only_the_models_jobs_that_deliver_to_it(kit) -> None:
    rig, fake, _approver = kit(turns=ChatTurns())
    fake.jobs.update(mine=_model_job("mine", CHAT), theirs=_model_job("theirs", OTHER))
    chat = {"mode": "DAEMON", "origin": "messengers"}
    res = rig.call("schedule_job", {"action": "list"}, **chat)
    assert not res.is_error, res.content
    assert sorted(j["name"] for j in res.content["jobs"]) == ["mine", "ops-report"]
    res = rig.call("schedule_job", {"action": "cancel", "name": "theirs"}, **chat)
    assert res.is_error and res.error_type == "tool_policy_denied"
    assert "does not deliver to this chat (telegram:-100123)" in res.content["error"]
    assert "Nothing was removed." in res.content["error"] and "\n" not in res.content["error"]
    assert "theirs" in fake.jobs and sched.REMOVE not in fake.types()
    res = rig.call("schedule_job", {"action": "cancel", "name": "mine"}, **chat)
    assert not res.is_error and res.content == {"cancelled": "mine", "removed": True}
    res = rig.call("schedule_job", {"action": "list"})  # at a terminal (IPC): every job
    assert sorted(j["name"] for j in res.content["jobs"]) == ["ops-report", "theirs"]


def test_on_a_worker_host_the_model_is_told_to_ask_on_the_main_host(make_rig) -> None:
    rig = make_rig(services={"worker_host": "w1"}, approvals=Approver())
    res = rig.call("schedule_job", {"action": "list"})
    error = res.content["error"]
    assert res.is_error and res.error_type == "tool_unavailable" and "\n" not in error
    assert "worker host w1" in error and "ask on the main host" in error and "no scheduler runs" not in error
