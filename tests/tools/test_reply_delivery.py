"""messenger.deliver in one process: a real LMDB record store, a fake messengers service; at most one post."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.protocol import messengers as mm
from geode.protocol.dispatch import Dispatch
from geode.protocol.errors import BadRequest, RequestTimeout, Unavailable
from geode.protocol.transport import LocalTransport, Request
from geode.records.models import REPLY_STEP, REPLY_TOOL, AdmitKind, ReceiptIdentity, ReceiptState
from geode.tools.reply_delivery import MessengersLost, ReplyDelivery, reply_scope
from tests.records.harness import LocalStore, local_store


class FakeMessengers:
    """Records each send; ``fail`` (an exception) is raised by the handler instead of posting, once."""

    def __init__(self) -> None:
        self.posts: list[mm.SendMessage] = []
        self.fail: Exception | None = None
        self.dispatch = Dispatch("fake messengers", {mm.SEND: self._send})

    def handle(self, request: Request) -> Any:
        return self.dispatch.handle(request)

    def _send(self, b: mm.SendMessage, r: Request) -> mm.MessageSent:
        if self.fail is not None:
            exc, self.fail = self.fail, None
            raise exc
        self.posts.append(b)
        return mm.MessageSent(
            platform="telegram", message_id=str(len(self.posts)), message_ids=[str(len(self.posts))]
        )


class LosingTransport(LocalTransport):
    """``lose`` (an exception) is raised in the caller once, as the bus does for a peer that died mid-call."""

    lose: Exception | None = None

    def call(self, *a: Any, **kw: Any) -> Any:  # type: ignore[override]
        if self.lose is not None:
            exc, self.lose = self.lose, None
            raise exc
        return super().call(*a, **kw)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[tuple[ReplyDelivery, LosingTransport, FakeMessengers, LocalStore]]:
    store = local_store(GeodeHome(tmp_path / "h").ensure())
    fake = FakeMessengers()
    transport = LosingTransport({"messengers": fake}, sender="executor#1")
    try:
        yield ReplyDelivery(store.client, transport, owner="executor#1"), transport, fake, store
    finally:
        store.close()


def ask(turn: str = "t1", text: str = "hello") -> mm.DeliverReply:
    return mm.DeliverReply(
        operation_id=f"reply:{turn}", session_id="tg-42", turn_id=turn, channel="telegram:42", text=text
    )


def test_a_reply_is_posted_once_and_a_retry_replays_it(rig: Any) -> None:
    delivery, _, fake, store = rig
    first = delivery.deliver(ask())
    again = delivery.deliver(ask())
    assert (first.state, first.message_ids) == ("posted", ["1"])
    assert (again.state, again.message_ids) == ("replayed", ["1"])
    assert len(fake.posts) == 1 and fake.posts[0].idempotency_key == "reply:t1"
    receipt = store.client.get_receipt("reply:t1")
    assert receipt is not None and receipt.state is ReceiptState.COMMITTED
    assert receipt.identity.session_id == reply_scope("tg-42")


@pytest.mark.parametrize("lost", [MessengersLost("messengers#1 exited"), RequestTimeout("no reply")])
def test_a_post_whose_outcome_is_unknown_is_uncertain_and_never_sent_again(rig: Any, lost: Exception) -> None:
    delivery, transport, fake, store = rig
    transport.lose = lost
    assert delivery.deliver(ask()).state == "uncertain"
    retry = delivery.deliver(ask())
    assert retry.state == "uncertain" and fake.posts == []
    uncertain = [r.operation_id for r in store.client.list_receipts(uncertain_only=True)]
    assert uncertain == ["reply:t1"]


def test_a_refused_post_is_settled_not_sent(rig: Any) -> None:
    delivery, _, fake, _ = rig
    fake.fail = BadRequest("telegram:42 is not a bound chat")
    out = delivery.deliver(ask())
    assert out.state == "not_sent" and "not a bound chat" in out.reason
    assert delivery.deliver(ask()).state == "not_sent" and fake.posts == []


def test_an_uncertain_reply_blocks_neither_later_replies_nor_the_sessions_tools(rig: Any) -> None:
    delivery, transport, _fake, store = rig
    transport.lose = MessengersLost("gone")
    assert delivery.deliver(ask("t1")).state == "uncertain"
    assert delivery.deliver(ask("t2", "second")).state == "posted"
    from geode.records.models import AdmitKind, ReceiptIdentity

    tool = ReceiptIdentity(
        session_id="tg-42", turn_id="t3", step_id="s1", tool_name="write_file", fingerprint="f"
    )
    assert store.client.admit("op-tool", tool, owner="executor#1").kind is AdmitKind.NEW


def test_send_message_whose_messengers_child_died_mid_post_is_not_reported_not_sent() -> None:
    """The model's send_message (BusMessenger): a refusal is "not sent", a child lost mid-post is not."""
    from geode.tools.builtin.messaging import BusMessenger
    from geode.tools.handlers import ToolFailure

    fake = FakeMessengers()
    transport = LosingTransport({"messengers": fake}, sender="executor#1")
    sender = BusMessenger(transport)
    fake.fail = BadRequest("telegram:7 is not a bound chat")
    with pytest.raises(ToolFailure, match="Nothing was posted"):
        sender.send("telegram:7", "7", "hi", idempotency_key="op-1")
    transport.lose = MessengersLost("messengers#1 exited with this post in flight")
    with pytest.raises(MessengersLost):  # the executor marks the receipt uncertain (a crashed handler)
        sender.send("telegram:42", "42", "hi", idempotency_key="op-2")


def test_a_post_the_platform_did_not_take_is_retried_when_due_as_a_new_attempt_and_posted_once(
    rig: Any,
) -> None:
    delivery, _, fake, store = rig
    now = [1000.0]
    delivery.clock = lambda: now[0]
    fake.fail = Unavailable(f"rate limited (429); nothing was posted {mm.retry_hint(120)}")
    first = delivery.deliver(ask())
    assert (first.state, first.retry_at, first.attempt) == ("deferred", 1120.0, 1)
    receipt = store.client.get_receipt("reply:t1")
    assert receipt is not None and receipt.state is ReceiptState.COMMITTED  # committed: nothing was posted
    assert receipt.result is not None and receipt.result["posted"] is False
    assert receipt.result["retry_at"] == 1120.0
    now[0] = 1119.0
    early = delivery.deliver(ask())  # not due: nothing admitted, nothing posted
    assert early.state == "deferred" and store.client.get_receipt("reply:t1~2") is None
    now[0] = 1120.0
    due = delivery.deliver(ask().model_copy(update={"attempt": early.attempt}))
    assert (due.state, due.attempt) == ("posted", 2)
    assert [p.idempotency_key for p in fake.posts] == ["reply:t1~2"]
    again = delivery.deliver(ask())  # after a restart the caller starts at attempt 1: the chain replays
    assert (again.state, again.message_ids) == ("replayed", due.message_ids) and len(fake.posts) == 1


def test_a_new_attempt_is_admitted_only_after_its_predecessor_is_committed_not_posted(rig: Any) -> None:
    _, _, _, store = rig
    ident = ReceiptIdentity(
        session_id=reply_scope("tg-42"),
        turn_id="t1",
        step_id=REPLY_STEP,
        tool_name=REPLY_TOOL,
        fingerprint="f",
    )
    c = store.client
    assert c.admit("reply:t1~2", ident, owner="x#1", after="reply:t1").kind is AdmitKind.CONFLICT  # no first
    assert c.admit("reply:t1", ident, owner="x#1").kind is AdmitKind.NEW
    assert c.admit("reply:t1~2", ident, owner="x#1", after="reply:t1").kind is AdmitKind.CONFLICT  # open
    c.commit("reply:t1", {"posted": False, "reason": "gone"})  # refused for good: no retry time
    assert c.admit("reply:t1~2", ident, owner="x#1", after="reply:t1").kind is AdmitKind.CONFLICT
    assert c.admit("reply:t2", ident, owner="x#1").kind is AdmitKind.NEW
    c.commit("reply:t2", {"posted": False, "reason": "429", "retry_at": 5.0})
    assert c.admit("reply:t2~2", ident, owner="x#1", after="reply:t2").kind is AdmitKind.NEW


def test_a_post_refused_for_now_without_a_retry_time_is_not_sent(rig: Any) -> None:
    delivery, _, fake, _ = rig
    fake.fail = Unavailable("the telegram messenger platform is not enabled: no token; nothing was posted")
    assert delivery.deliver(ask()).state == "not_sent" and fake.posts == []


def test_an_attempt_follows_one_observed_absent_but_not_an_operators_verdict_nor_one_observed_posted(
    rig: Any,
) -> None:
    from geode.records.models import Observation

    _, _, _, store = rig
    ident = ReceiptIdentity(
        session_id=reply_scope("tg-42"),
        turn_id="t1",
        step_id=REPLY_STEP,
        tool_name=REPLY_TOOL,
        fingerprint="f",
    )
    c = store.client
    seen = Observation(kind="chat_post", target="slack:C1", before="absent", intended="posted")
    for op, outcome, by, opens in (
        ("reply:a", "not_applied", "observation", True),
        ("reply:b", "not_applied", "ops", False),
        ("reply:c", "applied", "observation", False),
    ):
        assert c.admit(op, ident, owner="x#1").kind is AdmitKind.NEW
        c.mark_uncertain(op, "messengers#1 exited with this post in flight")
        observed = "absent" if outcome == "not_applied" else "posted"
        evidence = seen.model_copy(update={"observed": observed}) if by == "observation" else None
        c.reconcile(op, outcome=outcome, by=by, note="looked", evidence=evidence)
        kind = c.admit(f"{op}~2", ident, owner="x#1", after=op).kind
        assert kind is (AdmitKind.NEW if opens else AdmitKind.CONFLICT), (op, kind)
