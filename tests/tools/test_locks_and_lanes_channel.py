"""Keyed locks under contention (sorted: no deadlock, always released) and the lanes approval channel."""

from __future__ import annotations

import random
import threading

from geode.protocol import lanes as lanes_msg
from geode.protocol.errors import Unavailable
from geode.protocol.transport import LocalTransport, Request
from geode.tools.approval_lanes import LanesApprovalChannel
from geode.tools.approvals import ApprovalGate
from geode.tools.locks import KeyedLocks
from geode.tools.spec import ApprovalMode, EffectClass, SafetyPolicy, ToolContext, ToolSpec


def test_overlapping_key_sets_never_deadlock_and_always_release() -> None:
    locks = KeyedLocks()
    keys = [f"k{i}" for i in range(5)]
    counter = {"n": 0}
    errors: list[str] = []

    def worker(seed: int) -> None:
        rnd = random.Random(seed)
        for _ in range(200):
            chosen = tuple(rnd.sample(keys, rnd.randint(1, 4)))[::-1]  # deliberately unsorted
            held = locks.acquire(chosen, timeout_s=10)
            if held is None:
                errors.append("timeout")
                return
            counter["n"] += 1
            held.release()
            held.release()  # idempotent

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and counter["n"] == 1200
    assert locks.held_keys() == [] and locks._entries == {}  # entries vanish when unused (bounded)


def test_failed_acquire_holds_nothing() -> None:
    locks = KeyedLocks()
    first = locks.acquire(("b",), 1)
    assert locks.acquire(("a", "b"), 0.05) is None
    assert locks.acquire(("a",), 0.05) is not None  # "a" was released when "b" could not be taken
    first.release()


class _Lanes:
    def __init__(self, decision: str) -> None:
        self.decision = decision
        self.asks: list[lanes_msg.ApprovalAsk] = []

    def handle(self, request: Request):  # type: ignore[no-untyped-def]
        if self.decision == "raise":
            raise Unavailable("origin disconnected")
        self.asks.append(request.body)
        return lanes_msg.ApprovalDecision(approval_id=request.body.approval_id, decision=self.decision)


def _ctx() -> ToolContext:
    return ToolContext(session_id="s", turn_id="t", step_id="st", operation_id="op1")


SPEC = ToolSpec(
    name="w",
    description="w",
    handler="x:w",
    policy=SafetyPolicy(effect=EffectClass.MUTATE, approval=ApprovalMode.CACHED, resource_strategy="s"),
)


def test_lanes_channel_forwards_and_maps_the_decision() -> None:
    lanes = _Lanes("a")
    gate = ApprovalGate(LanesApprovalChannel(LocalTransport({"lanes": lanes})))
    v = gate.decide(_ctx(), SPEC, "w {}")
    assert v.granted and v.how == "a"
    [ask] = lanes.asks
    assert ask.session_id == "s" and ask.tool_name == "w" and ask.safety_level == "mutate/public"


def test_lanes_channel_error_denies() -> None:
    gate = ApprovalGate(LanesApprovalChannel(LocalTransport({"lanes": _Lanes("raise")})))
    v = gate.decide(_ctx(), SPEC, "w {}")
    assert not v.granted and v.how == "disconnected"


def test_lanes_channel_carries_the_whole_request_and_a_larger_one_is_denied_without_asking() -> None:
    """Breach 5: a 20,000-character request reaches the asker whole (was: cut at 2,048 on the wire), with
    what "always" covers; one larger than an approval message carries is denied, said why, never asked."""
    lanes = _Lanes("n")
    gate = ApprovalGate(LanesApprovalChannel(LocalTransport({"lanes": lanes})))
    detail = "w " + "x" * 20_000 + "; tail"
    assert not gate.decide(_ctx(), SPEC, detail).granted
    [ask] = lanes.asks
    assert ask.detail == detail and ask.always_covers == "every w call, for the rest of this session"
    huge = "w " + "x" * lanes_msg.APPROVAL_DETAIL_MAX
    v = gate.decide(_ctx(), SPEC, huge)
    assert not v.granted and v.how == "too_large" and "denied without asking" in v.message
    assert len(lanes.asks) == 1  # nobody was shown a cut request
