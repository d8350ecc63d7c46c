"""AUTOMATION has nobody to ask: a call that would ask is denied, saying why, and no approval request is ever
made; a tool an operator-defined job names runs without one (policy, not a prompt), never computer use and
never in another mode. The executor's gate knows the mode and the grant from each call's ToolContext."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from geode.config_schema import GeodeConfig
from geode.home import GeodeHome
from geode.loop import AgenticLoop, ListSink
from geode.protocol import turns
from geode.schedule.jobs import parse_job
from geode.sessions.automation import job_turn_settings
from geode.sessions.turn_setup import compose_turn
from geode.testing.function_model import FunctionModel
from geode.tools.approvals import ApprovalGate
from geode.tools.builtin.catalogue import builtin_specs
from geode.tools.executor import ToolExecutor
from geode.tools.paths import Exclusion
from geode.tools.plan import PlanRegistry
from geode.tools.policy import PolicyDenial, check_runtime_policy
from geode.tools.secret_files import SecretFiles
from geode.tools.spec import ApprovalMode, SafetyPolicy, ToolContext, ToolSpec
from tests.loop.fakes import open_store


class Asked:
    """An approval channel that records every request (and would say yes): AUTOMATION must never use it."""

    def __init__(self) -> None:
        self.requests: list[str] = []

    def request(self, ctx: Any, tool_name: str, detail: str, safety: SafetyPolicy) -> str:
        self.requests.append(tool_name)
        return "y"


def test_a_call_that_would_ask_is_denied_unasked_and_an_operator_grant_runs(make_rig: Any) -> None:
    asked = Asked()
    rig = make_rig(approvals=asked)
    denied = rig.call("probe_cached", {"x": 1}, mode="AUTOMATION")
    assert denied.is_error and denied.error_type == "permission_denied" and denied.executed is False
    assert "denied: no one to approve in AUTOMATION mode" in str(denied.content)
    assert "allowed_tools" in str(denied.content)  # and says how an operator allows it
    granted = rig.call("probe_cached", {"x": 2}, mode="AUTOMATION", granted_tools=("probe_cached",))
    assert not granted.is_error and rig.probes["probe_cached"].calls == [{"x": 2}]
    # a headless-denied tool the operator names passes the policy too; unnamed, it stays denied
    assert rig.call("probe_nohead", mode="AUTOMATION").error_type == "tool_policy_denied"
    assert not rig.call("probe_nohead", mode="AUTOMATION", granted_tools=("probe_nohead",)).is_error
    # a grant means nothing outside AUTOMATION, and a declared denial holds even there
    assert rig.call("probe_nohead", mode="DAEMON", granted_tools=("probe_nohead",)).is_error
    assert rig.call("probe_denied", mode="AUTOMATION", granted_tools=("probe_denied",)).is_error
    assert asked.requests == []  # nobody was ever asked
    rows = [r for r in rig.timeline() if r.kind == "tool.denied"]
    assert any("no one to approve in AUTOMATION mode" in str(r.payload.get("summary")) for r in rows)


def test_computer_use_is_never_granted_in_automation() -> None:
    asked = Asked()
    opted_in = GeodeConfig.from_raw({"daemon": {"allow_computer_use": True}})  # DAEMON's exception only
    gate = ApprovalGate(asked, config=opted_in)
    spec = ToolSpec(
        name="computer",
        description="c",
        handler="builtin:computer",
        policy=SafetyPolicy(approval=ApprovalMode.CACHED, allow_headless=False),
    )
    ctx = ToolContext(
        session_id="s",
        turn_id="t",
        step_id="st",
        operation_id="op",
        mode="AUTOMATION",
        granted_tools=("computer",),
    )
    verdict = gate.decide(ctx, spec, "screenshot")
    assert not verdict.granted and "no one to approve in AUTOMATION mode" in verdict.message
    with pytest.raises(PolicyDenial):
        check_runtime_policy(ctx, spec, opted_in)
    assert asked.requests == []


def _loop_turn(
    tmp_path: Path, job: dict[str, Any], calls: list[dict[str, Any]]
) -> tuple[Any, Asked, Any, Any]:
    """One occurrence's turn as the loop worker runs it: the scheduler's settings (job_turn_settings),
    composed by compose_turn, a scripted model, the real executor with the built-in tools."""
    home = GeodeHome(tmp_path / "h").ensure()
    config = GeodeConfig()
    catalogue = PlanRegistry().compile(builtin_specs())

    class Plans:
        from_executor = True

        def base(self) -> Any:
            return catalogue

    spec = parse_job({"name": "nightly", "every": "1h", "prompt": "run the script", **job})
    occurrence = "nightly@2027-01-01T00:00:00Z"
    settings = job_turn_settings(spec, occurrence=occurrence, config=config, home=home, plans=Plans(), env={})
    run = turns.TurnRun(
        turn_id="t-job", session_id=settings["session_id"], mode="AUTOMATION", settings=settings
    )
    turn = compose_turn(run, config, catalogue=catalogue, rules_dir=home.rules_dir)
    engine, records = open_store(tmp_path)
    asked = Asked()
    executor = ToolExecutor(owner="executor#1", records=records, approvals=asked, config=config)
    tool_calls = [{"name": c["name"], "input": c["input"], "id": f"tu{i}"} for i, c in enumerate(calls)]
    model = FunctionModel.script([{"tool_calls": tool_calls}, "done"])
    loop = AgenticLoop(
        model,
        executor,
        records,
        plan=turn.plan,
        events=ListSink(),
        settings=turn.settings,
        prompt=turn.prompt,
    )
    try:
        result = loop.run_turn(run.session_id, run.turn_id, spec.prompt)
        results = model.requests[1].messages[-1].tool_results
        assert executor.timeline.flush(5)
        rows = [(r.event.kind, r.event.payload) for r in records.read_timeline(run.session_id)]
    finally:
        executor.shutdown()
        engine.close()
    assert result.termination_reason == turns.TerminationReason.NATURAL
    return Path(turn.settings.workspace), asked, {r.tool_use_id: r for r in results}, rows


def test_an_operator_allowed_run_bash_runs_and_a_write_elsewhere_is_denied(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    ws, asked, results, rows = _loop_turn(
        tmp_path,
        {"allowed_tools": ["run_bash", "write_file"]},
        [
            {"name": "run_bash", "input": {"command": "echo ran > bash-out.txt"}},
            {"name": "write_file", "input": {"file_path": str(outside), "content": "x"}},
        ],
    )
    assert (ws / "bash-out.txt").read_text() == "ran\n" and not results["tu0"].is_error
    assert results["tu1"].is_error and "workspace policy" in results["tu1"].content and not outside.exists()
    assert asked.requests == []
    called = [p for k, p in rows if k == "tool.called" and p["tool_name"] == "run_bash"]
    assert called and called[0]["approval"] == "operator_allowed" and called[0]["mode"] == "AUTOMATION"


def test_a_job_without_the_operators_list_asks_nobody_and_runs_nothing_that_would_ask(tmp_path: Path) -> None:
    ws, asked, results, rows = _loop_turn(
        tmp_path,
        {},
        [
            {"name": "run_bash", "input": {"command": "echo ran > bash-out.txt"}},
            {"name": "write_file", "input": {"file_path": "inside.txt", "content": "x"}},
        ],
    )
    assert results["tu0"].is_error and not (ws / "bash-out.txt").exists()  # not in its plan at all
    assert results["tu1"].is_error and "no one to approve in AUTOMATION mode" in results["tu1"].content
    assert not (ws / "inside.txt").exists() and asked.requests == []
    why = [p for k, p in rows if k == "tool.denied" and p["tool_name"] == "write_file"]
    assert why and "no one to approve in AUTOMATION mode" in str(why[0]["summary"])


def test_a_jobs_workspace_in_the_home_is_usable_and_the_rest_of_the_home_is_not(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    excluded = Exclusion.of_home(home)  # the daemon's own home
    job_ws = home.root / "workspaces" / "job-nightly"
    job_ws.mkdir(parents=True)
    assert not excluded.covers(job_ws / "notes.md") and excluded.covers(home.root / "records" / "x")
    other = SecretFiles.scan(None, ())  # another home, found by its markers
    (home.root / "evidence").mkdir(exist_ok=True)
    assert not other.in_other_home(job_ws) and other.in_other_home(home.root / "logs")
