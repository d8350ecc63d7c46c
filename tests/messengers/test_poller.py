"""The messenger poller base in one process (fake translator, store, lanes and executor; the real runner
thread and loop): bound chats become DAEMON turns, the cursor moves only after the batch is recorded,
replies go out once (also after a restart), 429 and 409 are honoured, approvals only from approvers."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from geode.messengers.errors import Conflict, RateLimited, Rejected
from geode.messengers.model import Batch, CallbackPress
from geode.messengers.sessions import turn_id_for
from geode.protocol import lanes as lanes_msg
from tests.messengers.poller_fakes import FakeExecutor, FakeStore, FakeTranslator, Rig, msg
from tests.waiting import poll_for


def test_bound_message_is_one_turn_and_one_reply_unbound_and_sender_are_counted() -> None:
    with Rig() as rig:
        rig.translator.push(msg("100", 1, "hello there"))
        rig.translator.push(msg("300", 2, "unbound chat"))
        rig.translator.push(msg("200", 3, "not allowed", sender="9"))
        poll_for(lambda: rig.cursor() == "4", 5, what="the cursor after the batch")
        assert [s.input["text"] for s in rig.lanes.submits] == ["hello there"]
        sub = rig.lanes.submits[0]
        assert sub.mode == "DAEMON" and sub.origin == "messengers"
        assert sub.input["messenger"]["channel_key"] == "100"
        assert sub.settings["session_id"] == sub.session_id
        ignored = rig.poller.status.view()["ignored"]
        assert ignored == {"unbound": 1, "sender": 1}
        # the turn record and its journal slot are written before the cursor
        channels = [c for c, _ in rig.store.set_calls]
        assert channels.index("pending#0") < channels.index("updates")

        rig.event(sub.turn_id, lanes_msg.TURN_STARTED)
        poll_for(lambda: "100" in rig.translator.typings, 5, what="typing while the turn runs")
        outcome = rig.lanes.finish(sub.turn_id, "hi!")
        rig.event(sub.turn_id, lanes_msg.TURN_DONE, {"result": outcome})
        poll_for(lambda: rig.translator.posts, 5, what="the reply")
        assert rig.translator.posts == [("100", "hi!", "1")]
        poll_for(lambda: not rig.poller.out.state.pending, 5, what="the reply settled")  # type: ignore[union-attr]
        view = rig.poller.status.view()
        assert view["in"] == 1 and view["replies_out"] == 1 and view["state"] == "polling"
        # the same message delivered again (a new update id): no second turn, no second reply
        rig.translator.push(msg("100", 1, "hello there"))
        poll_for(lambda: rig.cursor() == "5", 5, what="the redelivery consumed")
        rig.event(sub.turn_id, lanes_msg.TURN_DONE, {"result": outcome})
        poll_for(lambda: rig.poller.status.ignored["duplicate"] == 1, 5, what="the duplicate counted")
        assert len(rig.lanes.submits) == 1
        assert len(rig.translator.posts) == 1


def test_restart_resumes_at_the_stored_offset_and_recovers_a_reply_lost_while_down() -> None:
    store, executor = FakeStore(), FakeExecutor()
    with Rig(store, executor) as rig:
        rig.translator.push(msg("100", 10, "first"))
        poll_for(lambda: rig.cursor() == "2", 5, what="the cursor")
        turn_id = rig.lanes.submits[0].turn_id
    assert store.get_cursor("telegram", "99", "pending.head") == "1"
    with Rig(store, executor) as rig2:  # the turn finished while the poller was down: no turn_done comes
        rig2.translator.next_id = 2
        poll_for(lambda: rig2.translator.offsets, 5, what="a poll")
        assert rig2.translator.offsets[0] == 2
        rig2.event(turn_id, lanes_msg.TURN_STARTED)  # it was running; then its turn_done is lost
        poll_for(lambda: rig2.poller.out.running, 5, what="the turn seen running")
        rig2.lanes.finish(turn_id, "late answer")
        poll_for(lambda: rig2.translator.posts, 5, what="the recovered reply")
        assert rig2.translator.posts == [("100", "late answer", "10")]
        poll_for(lambda: store.get_cursor("telegram", "99", "pending.tail") == "1", 5, what="settled")
        assert rig2.lanes.submits == []  # nothing old was submitted again
        assert rig2.poller.out.running == {}  # no typing goes on in that chat


def test_cursor_does_not_move_past_a_turn_lanes_did_not_take() -> None:
    with Rig() as rig:
        rig.lanes.down = True
        rig.translator.push(msg("100", 1, "one"))
        poll_for(lambda: rig.poller.status.state == "backoff", 15, what="backoff")
        assert rig.cursor() is None
        rig.lanes.down = False
        poll_for(lambda: rig.cursor() == "2", 5, what="the cursor after lanes is back")
        assert len(rig.lanes.submits) == 1


def test_rate_limit_delays_the_next_call_and_conflict_is_reported_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with Rig() as rig:
        poll_for(lambda: rig.translator.poll_times, 5, what="a first poll")
        rig.translator.fail("poll", RateLimited("too many", retry_after_s=0.5))
        n = len(rig.translator.poll_times)
        poll_for(lambda: rig.poller.status.rate_limited == 1, 5, what="the 429")
        limited_at = rig.translator.poll_times[-1]
        poll_for(lambda: len(rig.translator.poll_times) > n + 1, 5, what="the next poll")
        after = [t for t in rig.translator.poll_times if t > limited_at]
        assert after[0] - limited_at >= 0.45
        with caplog.at_level(logging.WARNING, logger="geode.messengers.poller"):
            rig.translator.fail(
                "poll", *(Conflict("terminated by other getUpdates request") for _ in range(4))
            )
            poll_for(lambda: rig.poller.status.conflicts == 4, 5, what="the conflicts")
            assert rig.poller.status.view()["last_error"].startswith("terminated")
            poll_for(lambda: rig.poller.status.state == "polling", 5, what="polling again")
        assert sum("conflict" in r.getMessage() for r in caplog.records) == 1


def test_approval_keyboard_answered_only_by_an_approver() -> None:
    with Rig() as rig:
        rig.translator.push(msg("200", 5, "write a file"))
        poll_for(lambda: rig.lanes.submits, 5, what="the turn")
        turn_id = turn_id_for("telegram", "200", "5")
        assert rig.lanes.submits[0].turn_id == turn_id
        ask = lanes_msg.ApprovalAsk(
            approval_id="ap-1", session_id="s", turn_id=turn_id, tool_name="write_file"
        )
        rig.event(turn_id, lanes_msg.APPROVAL_REQUEST, ask.model_dump(mode="json"))
        poll_for(lambda: rig.translator.keyboards, 5, what="the keyboard")
        key, text, buttons = rig.translator.keyboards[0]
        assert key == "200" and "write_file" in text
        deny = dict(buttons)["Deny"]
        press = {"platform": "telegram", "chat_id": "200", "message_id": "5001", "data": deny}
        rig.translator.push(CallbackPress(sender_id="7", callback_id="c1", **press))  # a sender, not approver
        poll_for(lambda: rig.translator.answers, 5, what="the refusal")
        assert rig.translator.answers[0] == ("c1", "You are not allowed to answer.")
        assert rig.lanes.replies == []
        rig.translator.push(CallbackPress(sender_id="8", callback_id="c2", **press))
        poll_for(lambda: rig.lanes.replies, 5, what="the decision")
        assert (rig.lanes.replies[0].approval_id, rig.lanes.replies[0].decision) == ("ap-1", "n")
        poll_for(lambda: rig.translator.edits, 5, what="the keyboard edited")
        assert "Denied by 8" in rig.translator.edits[0][2]
        # a chat whose binding names no approver and no sender is never asked: denied at once
        rig.translator.push(msg("100", 6, "write another"))
        poll_for(lambda: len(rig.lanes.submits) == 2, 5, what="the second turn")
        open_id = rig.lanes.submits[1].turn_id
        ask = lanes_msg.ApprovalAsk(
            approval_id="ap-2", session_id="s", turn_id=open_id, tool_name="write_file"
        )
        rig.event(open_id, lanes_msg.APPROVAL_REQUEST, ask.model_dump(mode="json"))
        poll_for(lambda: len(rig.lanes.replies) == 2, 5, what="the denial")
        assert (rig.lanes.replies[1].decision, rig.lanes.replies[1].reason) == ("n", "no_origin")
        assert len(rig.translator.keyboards) == 1
        # a press after lanes already denied it (its timeout) says so and changes nothing
        late = lanes_msg.ApprovalAsk(
            approval_id="ap-3", session_id="s", turn_id=turn_id, tool_name="write_file"
        )
        rig.lanes.stale.add("ap-3")
        rig.event(turn_id, lanes_msg.APPROVAL_REQUEST, late.model_dump(mode="json"))
        poll_for(lambda: len(rig.translator.keyboards) == 2, 5, what="the third keyboard")
        approve = dict(rig.translator.keyboards[1][2])["Approve"]
        rig.translator.push(CallbackPress(sender_id="8", callback_id="c3", **(press | {"data": approve})))
        poll_for(lambda: len(rig.translator.edits) == 2, 5, what="the late keyboard edited")
        assert "No answer in time" in rig.translator.edits[1][2]
        assert ("c3", "No longer pending") in rig.translator.answers


def test_commands_new_and_status_answer_in_the_chat() -> None:
    with Rig() as rig:
        rig.translator.push(msg("100", 1, "/status"))
        poll_for(lambda: rig.translator.posts, 5, what="the /status answer")
        assert "Session: s-telegram-100-g0" in rig.translator.posts[0][1]
        rig.translator.push(msg("100", 2, "/new"))
        poll_for(lambda: len(rig.translator.posts) == 2, 5, what="the /new answer")
        assert "g1" in rig.translator.posts[1][1]
        rig.translator.push(msg("100", 3, "after new"))
        poll_for(lambda: rig.lanes.submits, 5, what="the turn")
        assert "-g1-" in rig.lanes.submits[0].session_id


def test_a_failing_poller_is_restarted_in_process_and_shows_failed_meanwhile() -> None:
    rig = Rig()
    rig.translator.fail("start", Rejected("Unauthorized"), Rejected("Unauthorized"))
    rig.translator.fail("poll", Rejected("Bad Request: wrong offset"))
    with rig:
        poll_for(lambda: rig.poller.status.restarts >= 3, 5, what="three restarts")
        assert "wrong offset" in rig.poller.status.view()["last_error"]  # the last failure, kept for status
        rig.translator.push(msg("100", 1, "still here"))
        poll_for(lambda: rig.lanes.submits, 5, what="polling after the restarts")
        assert rig.poller.status.state == "polling"


def test_an_approval_asked_before_the_loop_runs_is_kept_and_asked() -> None:
    rig = Rig()  # not started yet: lanes re-asks pending approvals as soon as a restarted child connects
    turn_id = turn_id_for("telegram", "200", "5")
    meta = {"platform": "telegram", "channel_key": "200", "message_id": "5"}
    rig.lanes.submit(
        lanes_msg.Submit(
            turn_id=turn_id, session_id="s", mode="DAEMON", origin="messengers", input={"messenger": meta}
        )
    )
    ask = lanes_msg.ApprovalAsk(
        approval_id="ap-early", session_id="s", turn_id=turn_id, tool_name="write_file"
    )
    rig.event(turn_id, lanes_msg.APPROVAL_REQUEST, ask.model_dump(mode="json"))
    with rig:
        poll_for(lambda: rig.translator.keyboards, 5, what="the keyboard after the start")
        assert rig.translator.keyboards[0][0] == "200"


def test_an_update_that_can_never_be_handled_is_skipped_and_counted() -> None:
    calls: list[str] = []

    def settings(binding: Any, sid: str) -> dict[str, Any]:
        calls.append(sid)
        if len(calls) == 1:
            raise ValueError("a bug composing the first session")
        return {"session_id": sid}

    with Rig(settings=settings) as rig:
        rig.translator.push(msg("100", 1, "first"))
        rig.translator.push(msg("100", 2, "second"))
        poll_for(lambda: rig.cursor() == "3", 5, what="the cursor past both")
        assert rig.poller.status.ignored["error"] == 1
        assert [s.input["text"] for s in rig.lanes.submits] == ["second"]


class _PushTranslator(FakeTranslator):
    """A push platform (Slack, Discord): a poll hands out what arrived and forgets it; no cursor."""

    async def poll(self, cursor: str | None) -> Batch:
        batch = await super().poll(None)
        handed = {did for did, _ in batch.items}
        with self.lock:  # only what this poll handed out: a push during the poll is for the next one
            self.updates = [u for u in self.updates if str(u[0]) not in handed]
        return Batch(batch.items, None)


def test_push_batch_failed_half_way_is_retried_not_lost_and_confirmed_only_after_its_turns() -> None:
    rig = Rig()
    rig.translator = rig.poller.translator = rig.poller.out.translator = _PushTranslator()
    confirmed_when: list[int] = []
    real_confirm = rig.translator.confirm

    async def confirm(batch: Batch) -> None:
        confirmed_when.append(len(rig.lanes.submits))
        await real_confirm(batch)

    rig.translator.confirm = confirm  # type: ignore[method-assign]
    with rig:
        rig.lanes.down = True
        poll_for(lambda: rig.translator.poll_times, 5, what="a first poll")  # pushes land while it polls
        rig.translator.push(msg("100", 1, "one"))
        rig.translator.push(msg("100", 2, "two"))
        poll_for(lambda: rig.poller.status.state == "backoff", 15, what="backoff")
        assert rig.translator.confirmed == []  # nothing acked while its turn is not recorded
        rig.lanes.down = False
        poll_for(lambda: rig.translator.confirmed, 5, what="the batch confirmed")
        assert [s.input["text"] for s in rig.lanes.submits] == ["one", "two"]  # the same batch, not lost
        assert rig.translator.confirmed == [["1", "2"]] and confirmed_when == [2]
        assert rig.cursor() is None  # a push platform has no cursor to store
