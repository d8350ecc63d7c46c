"""LanesService in one process: serialization, global cap, durable records, worker death, restart, relay."""

from __future__ import annotations

import threading

import pytest

from geode.lanes.queue import LaneQueue
from geode.protocol import lanes as lanes_msg
from geode.protocol import runtime, turns
from geode.protocol.errors import BadRequest, Overloaded, Unavailable
from geode.records.models import TurnState
from tests.lanes.harness import done, make, req, submit


def test_two_prompts_on_one_session_serialize_and_records_progress() -> None:
    svc, tr, store = make()
    svc.worker_ready("loop-1", 1, capacity=2)
    submit(svc, "t1", "S")
    submit(svc, "t2", "S")
    assert [r["turn_id"] for r in tr.runs()] == ["t1"]
    rec = store.get_turn("t1")
    assert rec and rec.state == TurnState.RUNNING and (rec.worker, rec.incarnation) == ("loop-1", 1)
    assert store.get_turn("t2").state == TurnState.QUEUED  # type: ignore[union-attr]
    done(svc, "t1", "S", "loop-1")
    assert [r["turn_id"] for r in tr.runs()] == ["t1", "t2"]
    assert store.get_turn("t1").state == TurnState.DONE  # type: ignore[union-attr]
    kinds = [e["kind"] for e in tr.to("control", lanes_msg.ORIGIN_EVENT) if e["turn_id"] == "t1"]
    assert kinds == [lanes_msg.TURN_QUEUED, lanes_msg.TURN_STARTED, lanes_msg.TURN_DONE]


def test_global_cap_holds_across_entry_paths() -> None:
    svc, tr, _ = make(queue=LaneQueue(global_cap=2))
    for i in range(4):
        svc.worker_ready(f"loop-{i}", 1)
    submit(svc, "cli-1", "A", origin="control")
    submit(svc, "gw-1", "B", origin="messengers")
    submit(svc, "cli-2", "C", origin="control")
    assert len(tr.runs()) == 2 and svc.status()["lanes"]["running"] == 2
    done(svc, "gw-1", "B")
    assert [r["turn_id"] for r in tr.runs()] == ["cli-1", "gw-1", "cli-2"]
    assert tr.to("messengers", lanes_msg.ORIGIN_EVENT)[0]["turn_id"] == "gw-1"


def test_submit_is_idempotent_and_bounded() -> None:
    svc, _tr, _ = make(queue=LaneQueue(global_cap=1, session_queue_max=1))
    submit(svc, "t1", "S")
    assert submit(svc, "t1", "S").state == "queued"
    with pytest.raises(Overloaded):
        submit(svc, "t2", "S")


def test_store_failure_refuses_the_turn() -> None:
    svc, _tr, store = make()
    store.fail = True
    with pytest.raises(Unavailable):
        submit(svc, "t1", "S")
    assert svc.queued() == [] and svc.running() == []


def test_dead_worker_turn_is_requeued_with_resume_and_runs_once() -> None:
    svc, tr, store = make()
    svc.worker_ready("loop-1", 1)
    svc.worker_ready("loop-2", 1)
    submit(svc, "t1", "S")
    first = tr.runs()[0]["_worker"]
    other = "loop-2" if first == "loop-1" else "loop-1"
    svc.handle(req(runtime.CHILD_DIED, runtime.ChildDied(name=first, incarnation=1)))
    runs = tr.runs()
    assert [(r["turn_id"], r["_worker"], r.get("resume", False)) for r in runs] == [
        ("t1", first, False),
        ("t1", other, True),
    ]
    # the old worker's late report changes nothing; the new one completes it once
    done(svc, "t1", "S", worker=first)
    assert store.get_turn("t1").state == TurnState.RUNNING  # type: ignore[union-attr]
    done(svc, "t1", "S", worker=other)
    done(svc, "t1", "S", worker=other)
    assert store.get_turn("t1").state == TurnState.DONE  # type: ignore[union-attr]
    assert len([e for e in tr.to("control", lanes_msg.ORIGIN_EVENT) if e["kind"] == lanes_msg.TURN_DONE]) == 1


def test_missed_heartbeats_and_new_incarnation_count_as_death() -> None:
    clock = [0.0]
    svc, tr, _ = make(clock=lambda: clock[0])
    svc.worker_ready("loop-1", 1)
    submit(svc, "t1", "S")
    clock[0] = 10.0
    svc.worker_ready("loop-2", 1)
    svc.tick()  # loop-1 silent for 10 s: dead
    assert [(r["_worker"], r.get("resume", False)) for r in tr.runs()] == [
        ("loop-1", False),
        ("loop-2", True),
    ]
    submit(svc, "t2", "T")
    svc.worker_ready("loop-2", 2)  # loop-2 restarted: its turn comes back too
    assert tr.runs()[-1]["turn_id"] in {"t1", "t2"}


def test_lanes_restart_loses_and_duplicates_nothing() -> None:
    svc, tr, store = make(queue=LaneQueue(global_cap=1))
    svc.worker_ready("loop-1", 1)
    svc.worker_ready("loop-2", 1)
    submit(svc, "a", "A")
    submit(svc, "b", "B")
    submit(svc, "c", "C")
    running_on = tr.runs()[0]["_worker"]
    # lanes dies; a new incarnation reloads the records
    clock = [0.0]
    svc2, tr2, _ = make(store, queue=LaneQueue(global_cap=1), orphan_grace_s=3.0, clock=lambda: clock[0])
    assert svc2.running() == ["a"] and svc2.queued() == ["b", "c"]
    svc2.handle(
        req(turns.WORKER_HEARTBEAT, turns.WorkerHeartbeat(worker=running_on, incarnation=1, running=["a"]))
    )
    svc2.worker_ready("loop-2" if running_on == "loop-1" else "loop-1", 1)
    assert tr2.runs() == []  # "a" is confirmed still running: nothing re-run, cap still held
    done(svc2, "a", "A", running_on)
    done(svc2, "a", "A", running_on)
    assert [r["turn_id"] for r in tr2.runs()] == ["b"]


def test_restart_requeues_running_turn_whose_worker_is_gone() -> None:
    svc, _tr, store = make()
    svc.worker_ready("loop-1", 1)
    submit(svc, "a", "A")
    clock = [0.0]
    svc2, tr2, _ = make(store, orphan_grace_s=3.0, clock=lambda: clock[0])
    svc2.worker_ready("loop-1", 2)  # the whole tree restarted: a new incarnation
    assert [(r["turn_id"], r["resume"]) for r in tr2.runs()] == [("a", True)]
    svc3, tr3, _ = make(store, orphan_grace_s=3.0, clock=lambda: clock[0])
    svc3.worker_ready("loop-9", 1)
    assert tr3.runs() == []  # within the grace period the lane stays held
    clock[0] = 5.0
    svc3.handle(req(turns.WORKER_HEARTBEAT, turns.WorkerHeartbeat(worker="loop-9", incarnation=1, free=1)))
    svc3.tick()
    assert [(r["turn_id"], r["resume"]) for r in tr3.runs()] == [("a", True)]


def test_cancel_queued_and_running() -> None:
    svc, tr, store = make()
    svc.worker_ready("loop-1", 1)
    submit(svc, "t1", "S")
    submit(svc, "t2", "S")
    assert svc.cancel(lanes_msg.Cancel(turn_id="t2")).state == "queued_cancelled"
    out = store.get_turn("t2")
    assert out.state == TurnState.DONE and out.outcome["termination_reason"] == "user_cancelled"  # type: ignore[union-attr,index]
    assert svc.cancel(lanes_msg.Cancel(session_id="S")).state == "cancellation_requested"
    assert tr.to("loop-1", turns.TURN_CANCEL)[0]["turn_id"] == "t1"
    done(svc, "t1", "S", reason="user_cancelled")
    assert svc.cancel(lanes_msg.Cancel(turn_id="t1")).state == "already_done"


def _ask(svc, approval_id: str, timeout_s: float = 5.0):  # type: ignore[no-untyped-def]
    box = {}
    ask = lanes_msg.ApprovalAsk(
        approval_id=approval_id, session_id="S", turn_id="t1", tool_name="write_file", timeout_s=timeout_s
    )
    th = threading.Thread(target=lambda: box.setdefault("d", svc.ask_approval(ask)))
    th.start()
    return th, box


def _prompted(tr, approval_id: str) -> bool:  # type: ignore[no-untyped-def]
    asks = [
        e for e in tr.casts if e[1] == lanes_msg.ORIGIN_EVENT and e[2]["kind"] == lanes_msg.APPROVAL_REQUEST
    ]
    return any(e[2]["data"]["approval_id"] == approval_id for e in asks)


def test_approval_round_trip_timeout_and_origin_death() -> None:
    clock = [0.0]
    svc, tr, _ = make(clock=lambda: clock[0])
    svc.worker_ready("loop-1", 1)
    submit(svc, "t1", "S")
    th, box = _ask(svc, "ap1")
    assert tr.wait_for(lambda: any(e["kind"] == lanes_msg.APPROVAL_REQUEST for e in tr.to("control")))
    stale = lanes_msg.ApprovalReply(approval_id="stale", decision="y")
    assert svc.handle(req(lanes_msg.APPROVAL_REPLY, stale)).ok is False
    svc.handle(req(lanes_msg.APPROVAL_REPLY, lanes_msg.ApprovalReply(approval_id="ap1", decision="y")))
    th.join(5)
    assert box["d"].decision == "y"
    th, box = _ask(svc, "ap2", timeout_s=0.05)
    assert tr.wait_for(lambda: _prompted(tr, "ap2"))
    clock[0] = 1.0
    svc.tick()  # the actor's tick times it out; nobody waited inside lanes
    th.join(5)
    assert (box["d"].decision, box["d"].reason) == ("n", "timeout")
    th, box = _ask(svc, "ap3")
    assert tr.wait_for(lambda: _prompted(tr, "ap3"))
    svc.child_died("control", 1)
    th.join(5)
    assert (box["d"].decision, box["d"].reason) == ("n", "disconnect")


def test_daemon_turns_get_no_approval_prompt_unless_from_a_messenger_chat() -> None:
    svc, tr, _ = make()
    svc.submit(lanes_msg.Submit(turn_id="t1", session_id="S", mode="DAEMON", origin="webhook"))
    d = svc.ask_approval(
        lanes_msg.ApprovalAsk(approval_id="x", session_id="S", turn_id="t1", tool_name="run_bash")
    )
    assert (d.decision, d.reason) == ("n", "no_origin")
    # a bound chat's DAEMON turn: the messengers child asks the binding's approvers in the chat
    svc.submit(lanes_msg.Submit(turn_id="t2", session_id="S2", mode="DAEMON", origin="messengers"))
    box: dict[str, lanes_msg.ApprovalDecision] = {}
    ask = lanes_msg.ApprovalAsk(approval_id="ap-chat", session_id="S2", turn_id="t2", tool_name="write_file")
    th = threading.Thread(target=lambda: box.setdefault("d", svc.ask_approval(ask)))
    th.start()
    assert tr.wait_for(lambda: _prompted(tr, "ap-chat"))
    assert any(e["kind"] == lanes_msg.APPROVAL_REQUEST for e in tr.to("messengers"))
    reply = lanes_msg.ApprovalReply(approval_id="ap-chat", decision="n")
    assert svc.handle(req(lanes_msg.APPROVAL_REPLY, reply, sender="messengers#1")).ok is True  # type: ignore[union-attr]
    th.join(5)
    assert (box["d"].decision, box["d"].reason) == ("n", "user")


def test_events_relayed_in_order_with_replay() -> None:
    svc, tr, _ = make()
    svc.worker_ready("loop-1", 1)
    submit(svc, "t1", "S")
    for seq in (2, 1, 3):  # handlers may deliver out of order; the relay restores seq order
        ev = turns.TurnEvent(
            session_id="S", turn_id="t1", seq=seq, kind="text_delta", data={"text": str(seq)}
        )
        svc.handle(req(turns.TURN_EVENT, ev, sender="loop-1#1"))
    # fenced: a stale incarnation's event is dropped
    stale = turns.TurnEvent(session_id="S", turn_id="t1", seq=9, kind="text_delta", data={"text": "x"})
    svc.handle(req(turns.TURN_EVENT, stale, sender="loop-1#0"))
    deltas = [e for e in tr.to("control") if e["kind"] == "text_delta"]
    assert [e["data"]["text"] for e in deltas] == ["1", "2", "3"] or [e["data"]["text"] for e in deltas] == [
        "2",
        "1",
        "3",
    ]
    seqs = [e["seq"] for e in tr.to("control")]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    first = tr.to("control")[0]["seq"]
    rep = svc.replay(lanes_msg.Replay(session_id="S", after_seq=first))
    assert rep.complete and [e.seq for e in rep.events] == seqs[1:] and rep.running == "t1"
    done(svc, "t1", "S")
    rep = svc.replay(lanes_msg.Replay(session_id="S", after_seq=0))
    assert rep.outcomes[-1]["turn_id"] == "t1"


def test_pending_approvals_are_bounded_so_handlers_never_starve() -> None:
    svc, _tr, _ = make(max_pending_approvals=1)
    svc.worker_ready("loop-1", 1)
    submit(svc, "t1", "S")
    th, box = _ask(svc, "first")
    assert _tr.wait_for(lambda: _prompted(_tr, "first"))
    d = svc.ask_approval(
        lanes_msg.ApprovalAsk(approval_id="second", session_id="S", turn_id="t1", tool_name="x")
    )
    assert (d.decision, d.reason) == ("n", "duplicate_or_full")
    svc.handle(req(lanes_msg.APPROVAL_REPLY, lanes_msg.ApprovalReply(approval_id="first", decision="y")))
    th.join(5)
    assert box["d"].decision == "y"


def test_an_approval_is_answered_only_by_the_turns_origin_peer() -> None:
    svc, tr, _ = make()
    svc.worker_ready("loop-1", 1)
    submit(svc, "t1", "S")
    th, box = _ask(svc, "ap1")
    assert tr.wait_for(lambda: any(e["kind"] == lanes_msg.APPROVAL_REQUEST for e in tr.to("control")))
    reply = lanes_msg.ApprovalReply(approval_id="ap1", decision="y")
    assert svc.handle(req(lanes_msg.APPROVAL_REPLY, reply, sender="messengers#1")).ok is False  # type: ignore[union-attr]
    assert [p["approval_id"] for p in svc.desk.pending()] == ["ap1"]
    assert svc.handle(req(lanes_msg.APPROVAL_REPLY, reply, sender="control#2")).ok is True  # type: ignore[union-attr]
    th.join(5)
    assert box["d"].decision == "y"


def test_every_lanes_message_goes_through_one_dispatch_table() -> None:
    svc, _tr, _ = make()
    types = svc.lanes.query(lambda core: core.dispatch.types)
    assert types == {
        lanes_msg.SUBMIT,
        lanes_msg.CANCEL,
        lanes_msg.APPROVAL,
        lanes_msg.APPROVAL_REPLY,
        lanes_msg.REPLAY,
        lanes_msg.LANES_STATUS,
        lanes_msg.TURN,
        runtime.STATUS,
        runtime.PING,
        runtime.CHILD_DIED,
        turns.WORKER_READY,
        turns.WORKER_HEARTBEAT,
        turns.TURN_EVENT,
        turns.TURN_DONE,
    }
    with pytest.raises(BadRequest, match="lanes does not handle"):
        svc.handle(req(turns.TURN_RUN, turns.TurnRun(turn_id="x", session_id="S", input={"text": "x"})))
    svc.stop()


def test_a_client_that_saw_nothing_gets_a_turn_a_previous_lanes_ended_from_the_store() -> None:
    """Control died with the prompt's reply and lanes restarted after the turn ended: the client re-attaches
    with after_seq 0 to a lanes whose buffer never held that session. The replay cannot vouch for what an
    earlier incarnation streamed, so it says incomplete and carries the turn's durable outcome (before, it
    said complete with the outcome attached, and the client, trusting 'complete', waited forever)."""
    svc, _tr, store = make()
    svc.worker_ready("loop-1", 1)
    submit(svc, "t1", "S")
    done(svc, "t1", "S", "loop-1")
    later, _tr2, _ = make(store)  # the next lanes incarnation, over the same records
    rep = later.replay(lanes_msg.Replay(session_id="S", after_seq=0))
    assert not rep.complete and rep.events == []
    assert [o["turn_id"] for o in rep.outcomes] == ["t1"] and rep.outcomes[0]["outcome"]["text"] == "done t1"
