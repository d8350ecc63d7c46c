"""Every service answers through one Dispatch table: what each endpoint handles, and what it refuses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from actors.messengers import MessengersChild
from actors.tree.service import SupervisorService
from geode.control.core import ControlCore
from geode.home import GeodeHome
from geode.messengers.bindings import Bindings
from geode.messengers.config import MessengersSection
from geode.protocol import catalog, runtime
from geode.protocol import control as c
from geode.protocol import tools as m
from geode.protocol.errors import BadRequest, Unavailable
from geode.protocol.messengers import SEND, SendMessage
from geode.protocol.transport import LocalTransport
from geode.tools.executor import ToolExecutor
from geode.tools.service import ToolService

ROOT = Path(__file__).resolve().parents[2]
NOT_YET: tuple[str, ...] = ()  # lanes and the loop worker use Dispatch tables too now
LADDER = re.compile(r"\b(request|req|r)\.type\s*==|match\s+(request|req|r)\.type\b|isinstance\(body, m\.")


class _Tree:
    state = "running"

    def __init__(self) -> None:
        self.restarts: list[str] = []

    def snapshot(self) -> list[runtime.ChildInfo]:
        return []

    def request_stop(self) -> None: ...

    def request_restart(self, name: str) -> None:
        self.restarts.append(name)


def test_the_executor_table_is_the_tools_area_without_a_batch() -> None:
    svc = ToolService(ToolExecutor(owner="executor#1", records=None), catalogue=[])  # type: ignore[arg-type]
    assert svc.dispatch.types == {
        runtime.PING,
        runtime.STATUS,
        m.PLAN_BIND,
        m.EXECUTE,
        m.CANCEL,
        m.CATALOGUE,
    }
    with pytest.raises(BadRequest, match=r"unknown message type 'tool\.execute_batch'"):
        LocalTransport({"executor": svc}).call("executor", "tool.execute_batch", {"items": []})


def test_the_supervisor_refuses_a_type_it_does_not_handle() -> None:
    tree = _Tree()
    t = LocalTransport({"supervisor": SupervisorService(tree, "supervisor", 3)})
    assert t.call("supervisor", runtime.TREE_STATUS)["incarnation"] == 3
    t.call("supervisor", runtime.TREE_RESTART, runtime.RestartChild(name="executor"))
    assert tree.restarts == ["executor"]
    with pytest.raises(BadRequest, match=r"the supervisor does not handle 'tool\.catalogue'"):
        t.call("supervisor", m.CATALOGUE)  # it used to answer {} to anything


def test_messengers_answer_lifecycle_and_refuse_the_rest() -> None:
    svc = MessengersChild("messengers", 1, MessengersSection(), Bindings([]))
    t = LocalTransport({"messengers": svc.dispatch()})
    assert t.call("messengers", runtime.STATUS)["detail"]["platforms"] == []
    t.call("messengers", runtime.CHILD_DIED, runtime.ChildDied(name="executor", incarnation=2))
    assert [d.name for d in svc.deaths] == ["executor"]
    with pytest.raises(BadRequest, match=r"messengers does not handle 'tool\.catalogue'"):
        t.call("messengers", m.CATALOGUE)
    send = SendMessage(channel="slack:C1", recipient="U1", text="hi", idempotency_key="k")
    with pytest.raises(Unavailable, match="no messenger platform is enabled"):
        t.call("messengers", SEND, send)


def test_control_handles_every_cli_request_in_the_catalogue(tmp_path: Path) -> None:
    core = ControlCore(LocalTransport({}), lambda conn, env: None, home=GeodeHome(tmp_path / "h"))
    cli = {t for t in catalog.load_all() if t.startswith("cli.")}
    assert core.dispatch.types == cli - {c.CLI_EVENT, c.CLI_EVENTS, c.CLI_NOTICE}  # those the daemon sends
    assert {c.STATUS, c.SESSIONS, c.RECEIPTS, c.RECONCILE, c.RESTART, c.STOP} <= core.dispatch.types


def test_no_service_dispatches_with_a_ladder_on_the_request_type() -> None:
    found = []
    for path in sorted([*ROOT.glob("geode/**/*.py"), *ROOT.glob("actors/**/*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(NOT_YET):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if LADDER.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert found == [], "dispatch through geode.protocol.dispatch.Dispatch instead:\n" + "\n".join(found)
