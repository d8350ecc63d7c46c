"""Settling uncertain chat replies by observation (geode/messengers/observe.py) with fakes for the store and
the platform; and the Slack half through the real slack_sdk against the local Slack server: a reply posted
under ``posting_as`` carries its operation id in the message metadata and ``find_reply`` reads it back from
the thread (``conversations.replies``) or the channel (``conversations.history``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.messengers.errors import PlatformError
from geode.messengers.observe import ABSENT, POSTED, LookFor, Observer, posting_as, slack_metadata
from geode.messengers.schedule import PollerStatus
from geode.messengers.slack import SlackTranslator
from geode.protocol.errors import Conflict
from geode.records.models import (
    REPLY_STEP,
    REPLY_TOOL,
    Observation,
    Receipt,
    ReceiptIdentity,
    ReceiptState,
    TurnRecord,
    TurnState,
)
from geode.testing.slack_server import LocalSlack
from geode.tools.reply_delivery import MessengersLost

NOW = 10_000.0
GRACE = 60.0


def _receipt(op: str, turn: str, *, uncertain_at: float, tool: str = REPLY_TOOL) -> Receipt:
    ident = ReceiptIdentity(
        session_id="s1#replies", turn_id=turn, step_id=REPLY_STEP, tool_name=tool, fingerprint="f"
    )
    return Receipt(
        operation_id=op,
        identity=ident,
        state=ReceiptState.UNCERTAIN,
        owner="executor#1",
        created_at=uncertain_at - 1,
        updated_at=uncertain_at,
        uncertain_reason="messengers#1 exited with this post in flight",
    )


def _turn(turn: str, platform: str = "slack") -> TurnRecord:
    meta = {"platform": platform, "channel_key": "C0GEODE01", "message_id": "1700000000.000100"}
    return TurnRecord(
        turn_id=turn,
        session_id="s1",
        state=TurnState.DONE,
        input={"text": "hi", "messenger": meta},
        outcome={"text": "echo: hi"},
    )


class FakeStore:
    def __init__(self, receipts: list[Receipt], turns: list[TurnRecord]) -> None:
        self.receipts = {r.operation_id: r for r in receipts}
        self.turns = {t.turn_id: t for t in turns}
        self.reconciled: dict[str, tuple[str, str, str, Observation | None]] = {}
        self.refuse = False
        self.turn_reads = 0

    def list_receipts(
        self, *, session_id: str | None = None, uncertain_only: bool = False, limit: int = 200
    ) -> list[Receipt]:
        return [r for r in self.receipts.values() if r.state == ReceiptState.UNCERTAIN or not uncertain_only]

    def get_turn(self, turn_id: str) -> TurnRecord | None:
        self.turn_reads += 1
        return self.turns.get(turn_id)

    def reconcile(
        self, operation_id: str, *, outcome: str, by: str, note: str = "", evidence: Observation | None = None
    ) -> Receipt:
        if self.refuse:
            raise Conflict(f"receipt {operation_id} already reconciled as applied")
        self.reconciled[operation_id] = (outcome, by, note, evidence)
        r = self.receipts[operation_id]
        update = {"state": ReceiptState.RECONCILED, "outcome": outcome}
        self.receipts[operation_id] = r.model_copy(update=update)
        return self.receipts[operation_id]


class FakeFinder:
    """A translator that can read its chat: ``posted`` maps operation ids to message ids."""

    def __init__(self, posted: dict[str, str], fail: bool = False) -> None:
        self.posted = posted
        self.fail = fail
        self.looked: list[LookFor] = []

    async def find_reply(self, look: LookFor) -> str | None:
        self.looked.append(look)
        if self.fail:
            raise PlatformError("conversations.history: service_unavailable", retryable=True)
        return self.posted.get(look.operation_id)


class Blind:
    """A translator that cannot read its chat (Telegram)."""


def _observer(store: FakeStore, translator: object, platform: str = "slack") -> tuple[Observer, PollerStatus]:
    status = PollerStatus(platform)
    return Observer(platform, translator, store, status, grace_s=GRACE, clock=lambda: NOW), status


def test_a_reply_found_in_the_chat_is_applied_and_one_not_found_not_applied_both_by_observation() -> None:
    store = FakeStore(
        [
            _receipt("op-a", "t-a", uncertain_at=NOW - GRACE - 1),
            _receipt("op-b", "t-b", uncertain_at=NOW - GRACE - 1),
        ],
        [_turn("t-a"), _turn("t-b")],
    )
    finder = FakeFinder({"op-a": "1700000001.000200"})
    observer, status = _observer(store, finder)
    out = asyncio.run(observer.run_pass())
    assert (out.applied, out.not_applied, out.kept) == (1, 1, 0)
    outcome, by, note, evidence = store.reconciled["op-a"]
    assert (outcome, by) == ("applied", "observation")
    assert "1700000001.000200" in note
    assert evidence is not None and (evidence.kind, evidence.observed) == ("chat_post", "posted")
    assert evidence.target == "slack:C0GEODE01 reply to 1700000000.000100"
    outcome, by, _, evidence = store.reconciled["op-b"]
    assert (outcome, by) == ("not_applied", "observation")
    assert evidence is not None and evidence.observed == "absent"
    look = finder.looked[0]
    assert (look.channel_key, look.reply_to, look.text) == ("C0GEODE01", "1700000000.000100", "echo: hi")
    assert status.uncertain_replies == 0
    assert asyncio.run(observer.run_pass()).applied == 0  # settled: never looked at again
    assert len(finder.looked) == 2


class FakeJournal:
    """The outbox's side of a reply observed absent: ``owe`` (journal again), then ``deliver``."""

    def __init__(self, store: FakeStore, loaded: bool = True) -> None:
        self.store, self.loaded = store, loaded
        self.calls: list[tuple[str, str, bool]] = []  # (call, turn, its receipt reconciled by then)

    def _settled(self, turn_id: str) -> bool:
        ops = [op for op, r in self.store.receipts.items() if r.identity.turn_id == turn_id]
        return any(op in self.store.reconciled for op in ops)

    async def owe(self, turn_id: str) -> bool:
        self.calls.append(("owe", turn_id, self._settled(turn_id)))
        return self.loaded

    async def deliver(self, turn_id: str, outcome: dict[str, Any] | None = None) -> None:
        self.calls.append(("deliver", turn_id, self._settled(turn_id)))


def test_a_reply_observed_absent_is_journaled_owed_before_its_reconcile_then_delivered() -> None:
    store = FakeStore(
        [
            _receipt("op-a", "t-a", uncertain_at=NOW - GRACE - 1),
            _receipt("op-b", "t-b", uncertain_at=NOW - GRACE - 1),
        ],
        [_turn("t-a"), _turn("t-b")],
    )
    journal = FakeJournal(store, loaded=False)
    status = PollerStatus("slack")
    observer = Observer(
        "slack", FakeFinder({"op-a": "1.2"}), store, status, grace_s=GRACE, clock=lambda: NOW, owed=journal
    )
    out = asyncio.run(observer.run_pass())  # the journal is not loaded yet: op-b is kept for a later pass
    assert (out.applied, out.not_applied, out.kept) == (1, 0, 1) and list(store.reconciled) == ["op-a"]
    journal.loaded = True
    store.reconciled.clear()
    assert asyncio.run(observer.run_pass()).not_applied == 1
    # owed again before the verdict is stored (a kill between them loses nothing), delivered after it;
    # the reply found in the chat (op-a) is never owed again
    assert journal.calls == [("owe", "t-b", False), ("owe", "t-b", False), ("deliver", "t-b", True)]


def test_a_reply_in_its_grace_is_not_looked_for_and_stays_uncertain() -> None:
    store = FakeStore([_receipt("op-a", "t-a", uncertain_at=NOW - GRACE + 1)], [_turn("t-a")])
    finder = FakeFinder({})
    observer, status = _observer(store, finder)
    assert asyncio.run(observer.run_pass()).kept == 1
    assert finder.looked == [] and store.reconciled == {}
    assert status.uncertain_replies == 1


def test_telegram_cannot_look_its_uncertain_replies_stay_for_the_operator_and_are_counted() -> None:
    store = FakeStore([_receipt("op-a", "t-a", uncertain_at=NOW - 3600)], [_turn("t-a", "telegram")])
    observer, status = _observer(store, Blind(), platform="telegram")
    assert asyncio.run(observer.run_pass()).kept == 1
    assert store.reconciled == {}
    assert status.uncertain_replies == 1
    assert asyncio.run(observer.run_pass()).kept == 1
    assert store.turn_reads == 1  # each receipt's turn is read once, not on every pass


def test_a_failed_look_or_a_refused_reconcile_keeps_it_uncertain() -> None:
    store = FakeStore([_receipt("op-a", "t-a", uncertain_at=NOW - 3600)], [_turn("t-a")])
    observer, _ = _observer(store, FakeFinder({}, fail=True))
    assert asyncio.run(observer.run_pass()).kept == 1
    assert store.reconciled == {}
    store.refuse = True  # an operator reconciled it meanwhile
    observer, _ = _observer(store, FakeFinder({"op-a": "1.2"}))
    assert asyncio.run(observer.run_pass()).kept == 1


def test_other_platforms_tool_receipts_and_missing_turns_are_left_alone() -> None:
    store = FakeStore(
        [
            _receipt("op-tg", "t-tg", uncertain_at=0),
            _receipt("op-tool", "t-a", uncertain_at=0, tool="write_file"),
            _receipt("op-gone", "t-gone", uncertain_at=0),
        ],
        [_turn("t-tg", "telegram"), _turn("t-a")],
    )
    finder = FakeFinder({"op-tg": "1", "op-tool": "2", "op-gone": "3"})
    observer, _ = _observer(store, finder)
    out = asyncio.run(observer.run_pass())
    assert (out.applied, out.not_applied, out.kept) == (0, 0, 0)
    assert finder.looked == [] and store.reconciled == {}


def test_posting_as_names_the_reply_in_slack_metadata_only_inside_it() -> None:
    async def post() -> dict[str, Any] | None:
        return slack_metadata()

    assert slack_metadata() is None
    meta = asyncio.run(posting_as("op-1", post()))
    assert meta == {"event_type": "geode_reply", "event_payload": {"operation_id": "op-1"}}
    assert slack_metadata() is None


# --- the Slack half: the real slack_sdk against the local server ------------------------------------------
CHAN = "C0GEODE01"


@pytest.fixture
def slack() -> Iterator[LocalSlack]:
    with LocalSlack() as server:
        yield server


@pytest.fixture
async def tr(slack: LocalSlack) -> AsyncIterator[SlackTranslator]:
    translator = SlackTranslator(slack.bot_token, slack.app_token, base_url=slack.api_url, poll_timeout_s=1)
    try:
        await translator.start()
        yield translator
    finally:
        await translator.close()


async def test_slack_finds_the_reply_by_its_operation_id_in_the_thread_and_in_a_flat_channel(
    slack: LocalSlack, tr: SlackTranslator
) -> None:
    since = time.time() - 5
    asked = slack.push_message(CHAN, "hello", user="U0ALICE01")
    await tr.send_text(CHAN, "not a reply", reply_to=asked["ts"])  # the bot's post without an operation id
    (ts,) = await posting_as("op-1", tr.send_text(CHAN, "echo: hello", reply_to=asked["ts"]))
    (flat,) = await posting_as("op-2", tr.send_text("D0DIRECT1", "echo: dm", reply_to="1.0"))
    assert slack.posts(CHAN)[-1]["metadata"]["event_payload"] == {"operation_id": "op-1"}

    def look(op: str, key: str = CHAN, reply_to: str = asked["ts"]) -> LookFor:
        return LookFor(operation_id=op, channel_key=key, reply_to=reply_to, text="", since=since)

    assert await tr.find_reply(look("op-1")) == ts
    assert await tr.find_reply(look("op-2", "D0DIRECT1", "1.0")) == flat
    assert await tr.find_reply(look("op-3")) is None  # never posted
    assert await tr.find_reply(look("op-2")) is None  # posted, but in another chat
    assert await tr.find_reply(LookFor("op-1", CHAN, asked["ts"], "", since=time.time() + 60)) is None
    with pytest.raises(PlatformError):
        await tr.find_reply(look("op-1", reply_to="1.999"))  # thread_not_found: could not look


# --- what a reconciled reply replays as: the real store and the executor's ReplyDelivery -------------------
def test_a_reply_observed_applied_replays_one_observed_absent_is_posted_once_as_the_next_attempt(
    tmp_path: Path,
) -> None:
    """Found → replayed, never posted again; looked for and absent → still owed: the next delivery posts it
    once as ``<op>~2`` (then replays); an operator's not_applied is the operator's: not sent, no post."""
    from geode.home import GeodeHome
    from geode.protocol import messengers as mm
    from geode.protocol.transport import LocalTransport
    from geode.tools.reply_delivery import ReplyDelivery
    from tests.records.harness import local_store
    from tests.tools.test_reply_delivery import FakeMessengers, LosingTransport

    store = local_store(GeodeHome(tmp_path / "h").ensure())
    fake = FakeMessengers()
    transport = LosingTransport({"messengers": fake}, sender="executor#1")
    assert isinstance(transport, LocalTransport)
    delivery = ReplyDelivery(store.client, transport, owner="executor#1")
    try:
        for turn, outcome, by in (
            ("t1", "applied", "observation"),
            ("t2", "not_applied", "observation"),
            ("t3", "not_applied", "ops"),
        ):
            ask = mm.DeliverReply(
                operation_id=f"reply:{turn}",
                session_id="sl-1",
                turn_id=turn,
                channel="slack:C0GEODE01",
                text="hi",
            )
            transport.lose = MessengersLost("messengers#1 exited")
            assert delivery.deliver(ask).state == "uncertain"
            transport.lose = None
            seen = POSTED if outcome == "applied" else ABSENT
            evidence = Observation(kind="chat_post", target="slack:C0GEODE01", before=ABSENT, intended=POSTED)
            store.client.reconcile(
                f"reply:{turn}",
                outcome=outcome,
                by=by,
                note="found the post in the chat: message 1.2" if seen == POSTED else "no post of it",
                evidence=evidence.model_copy(update={"observed": seen}) if by == "observation" else None,
            )
            again = delivery.deliver(ask)
            if outcome == "applied":  # the post is there: replayed, not "not sent"
                assert again.state == "replayed" and fake.posts == [], again
            elif by == "observation":  # absent: owed, posted once as the chain's next attempt
                assert (again.state, again.attempt) == ("posted", 2), again
                assert [p.idempotency_key for p in fake.posts] == ["reply:t2~2"]
                assert delivery.deliver(ask).state == "replayed" and len(fake.posts) == 1
            else:  # the operator's verdict: answered by hand if at all
                assert again.state == "not_sent" and "reconciled not_applied by ops" in again.reason
        assert [p.idempotency_key for p in fake.posts] == ["reply:t2~2"]
    finally:
        store.close()


# --- the Discord half: discord.py against the local Discord server -----------------------------------------
async def test_discord_finds_the_reply_by_its_author_reply_reference_and_text() -> None:
    from geode.messengers.discord import DiscordTranslator
    from geode.testing.discord_server import CHANNELS, LocalDiscord

    with LocalDiscord() as dc:
        tr = DiscordTranslator(
            dc.token, base_url=dc.api_base, gateway_url=dc.gateway_url, poll_timeout_s=5,
            connect_timeout_s=10, guild_ready_timeout_s=0.05,
        )  # fmt: skip
        try:
            await tr.start()
            since = time.time() - 5
            chan = CHANNELS[0]
            asked, other = dc.push_message(chan, "hello"), dc.push_message(chan, "hello again")
            dc.push_message(chan, "echo: hello")  # a user's message with the reply's text
            await tr.send_text(str(chan), "echo: hello", reply_to=str(other["id"]))  # the same text elsewhere
            (mid,) = await tr.send_text(str(chan), "echo: hello", reply_to=str(asked["id"]))

            def look(text: str, reply_to: str = str(asked["id"]), at: float = since) -> LookFor:
                return LookFor(
                    operation_id="op-1", channel_key=str(chan), reply_to=reply_to, text=text, since=at
                )

            assert await tr.find_reply(look("echo: hello")) == mid
            assert await tr.find_reply(look("echo: bye")) is None  # never posted
            assert await tr.find_reply(look("echo: hello", at=time.time() + 60)) is None  # posted before
            assert (
                await tr.find_reply(look("echo: hello", reply_to=str(dc.push_message(chan, "x")["id"])))
                is None
            )
        finally:
            await tr.close()
