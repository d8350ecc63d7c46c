"""The supervisor's side of `geode reload` (actors/tree/service.py), in-process: it tells the running children
named (by name or kind) through one event, keeps their confirmations when the CLI asks again, and counts a
child started since as applied; a stopped child is not told."""

from __future__ import annotations

from typing import Any

from actors.tree.service import SupervisorService
from geode.protocol import lifecycle, runtime
from geode.protocol.transport import LocalTransport


class FakeTree:
    state = "running"

    def __init__(self) -> None:
        self.kids = {
            "executor": runtime.ChildInfo(name="executor", incarnation=1, state="running"),
            "messengers": runtime.ChildInfo(name="messengers", incarnation=1, state="running"),
            "loop-1": runtime.ChildInfo(name="loop-1", incarnation=1, state="running"),
            "loop-2": runtime.ChildInfo(name="loop-2", incarnation=1, state="backoff"),
        }

    def snapshot(self) -> list[runtime.ChildInfo]:
        return list(self.kids.values())

    def request_stop(self) -> None: ...
    def request_restart(self, name: str) -> None: ...


def test_children_are_told_once_confirmations_kept_and_a_restarted_child_counts() -> None:
    tree, events = FakeTree(), []

    def publish(topic: str, body: dict[str, Any]) -> None:
        events.append((topic, lifecycle.ConfigReload.model_validate(body)))

    t = LocalTransport({"supervisor": SupervisorService(tree, "supervisor", 1, publish=publish)})

    def ask(children: list[str]) -> list[str]:
        reply = t.call("supervisor", runtime.TREE_RELOAD, runtime.ReloadTree(stamp="s1", children=children))
        return runtime.ReloadAsked.model_validate(reply).asked

    def state() -> runtime.ReloadState:
        reply = t.call("supervisor", runtime.TREE_RELOAD_STATE, runtime.ReloadQuery(stamp="s1"))
        return runtime.ReloadState.model_validate(reply)

    assert ask(["executor", "messengers", "loop"]) == ["executor", "loop-1", "messengers"]  # loop-2 is down
    assert [(topic, e.children) for topic, e in events] == [
        (lifecycle.CONFIG_RELOAD, ["executor", "loop-1", "messengers"])
    ]
    done = runtime.ConfigApplied(name="executor", incarnation=1, stamp="s1", applied=["hooks reloaded"])
    t.call("supervisor", runtime.CONFIG_APPLIED, done)
    tree.kids["messengers"] = runtime.ChildInfo(name="messengers", incarnation=2, state="running")
    got = state()
    assert [c.name for c in got.confirmed] == ["executor"] and got.restarted == ["messengers"]
    assert ask(["loop-1"]) == ["loop-1"]  # the CLI asks the silent one again: what was confirmed stays
    assert events[-1][1].children == ["loop-1"]
    got = state()
    assert [c.name for c in got.confirmed] == ["executor"] and got.restarted == ["messengers"]
    assert state().model_dump() == got.model_dump()
    unknown = runtime.ReloadState.model_validate(
        t.call("supervisor", runtime.TREE_RELOAD_STATE, runtime.ReloadQuery(stamp="never"))
    )
    assert unknown.confirmed == [] and unknown.restarted == []
