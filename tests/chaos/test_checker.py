"""The chaos checker on made-up histories: each violation of DESIGN.md §5 it exists to catch is caught (a
duplicated effect, an acknowledged effect missing, an effect without a receipt, an uncertain receipt with no
kill of its owner, an unfinished turn), and a clean history passes."""

from __future__ import annotations

from geode.records.models import Receipt, ReceiptIdentity, ReceiptState, TurnRecord, TurnState
from tests.chaos.checker import check, pct
from tests.chaos.driver import Kill, Op, Record, Sample
from tests.chaos.evidence import Evidence


def _op(tag: str, *, applied: bool = True, t0: float = 10.0) -> Op:
    text = f"applied {tag}" if applied else f"not-applied {tag}: denied"
    return Op(
        tag=tag,
        client=1,
        t_invoke=t0,
        t_end=t0 + 1,
        kind="ok",
        session_id=f"s-{tag}",
        turn_id=f"t-{tag}",
        reason="natural",
        text=text,
    )


def _receipt(tag: str, state: ReceiptState = ReceiptState.COMMITTED, owner: str = "executor#1") -> Receipt:
    ident = ReceiptIdentity(
        session_id=f"s-{tag}", turn_id=f"t-{tag}", step_id="1", tool_name="run_bash", fingerprint="f"
    )
    return Receipt(
        operation_id=f"op-{tag}", identity=ident, state=state, owner=owner, created_at=100.0, updated_at=101.0
    )


def _record(*ops: Op, kills: list[Kill] | None = None) -> Record:
    rec = Record(ops=list(ops), kills=kills or [], t_start=0.0, t_chaos=5.0, t_calm_end=30.0)
    kids: dict[str, tuple[str, int | None, int]] = {"executor": ("running", 1, 2)}
    rec.samples = [Sample(5.0, kids), Sample(20.0, kids)]
    return rec


def _evidence(*tags: str) -> Evidence:
    every = {f"s-{t}" for t in "abcdefgh"}
    return Evidence(receipts={f"s-{t}": [_receipt(t)] for t in tags}, receipts_checked=every, settled=True)


def test_a_clean_history_passes() -> None:
    rep = check(_record(_op("a"), _op("b")), [("a", "x1"), ("b", "x2")], _evidence("a", "b"), 25)
    assert rep.violations == {}, rep.lines()
    assert "0 dup, 0 dup posts, 0 lost, 0 unexplained, 0 stuck" in rep.summary()


def test_a_marker_twice_is_a_duplicate() -> None:
    rep = check(_record(_op("a")), [("a", "x1"), ("a", "x1")], _evidence("a"), 25)
    assert rep.n("duplicate") == 1 and "1 dup" in rep.summary()


def test_an_acknowledged_effect_that_never_ran_is_lost() -> None:
    rep = check(_record(_op("a")), [], _evidence("a"), 25)
    assert rep.n("lost") == 2, rep.lines()  # the answer said applied, and so does the committed receipt
    assert "acknowledged, no effect" in rep.violations["lost"][0]
    assert "receipt committed, no effect" in rep.violations["lost"][1]


def test_an_effect_without_a_receipt_is_lost() -> None:
    rep = check(_record(_op("a")), [("a", "x1")], _evidence(), 25)
    assert rep.n("lost") == 1 and "without receipt" in rep.violations["lost"][0]


def test_an_uncertain_receipt_needs_a_kill_of_its_owner() -> None:
    ev = _evidence("a")
    ev.uncertain = [_receipt("a", ReceiptState.UNCERTAIN, owner="executor#1")]
    assert check(_record(_op("a")), [("a", "x1")], ev, 25).n("unexplained_uncertain") == 1
    killed = [Kill(t=12.0, wall=500.0, name="executor", pid=1, incarnation=1)]
    assert check(_record(_op("a"), kills=killed), [("a", "x1")], ev, 25).violations == {}


def test_unfinished_turns_and_an_unsettled_tree_are_stuck() -> None:
    ev = _evidence("a")
    ev.turns = [TurnRecord(turn_id="t-z", session_id="s-z", state=TurnState.RUNNING)]
    ev.settled, ev.unsettled_why = False, "lanes busy"
    rep = check(_record(_op("a")), [("a", "x1")], ev, 25)
    assert rep.n("unfinished") == 1 and rep.n("stuck") == 1 and "2 stuck" in rep.summary()


def test_kill_to_serving_is_measured_from_the_samples() -> None:
    rec = _record(_op("a"), kills=[Kill(t=6.0, wall=0.0, name="executor", pid=1, incarnation=1)])
    rec.samples = [
        Sample(6.1, {"executor": ("backoff", None, 1)}),
        Sample(6.5, {"executor": ("running", 2, 2)}),
    ]
    rep = check(rec, [("a", "x1")], _evidence("a"), 25)
    assert abs(pct(rep.kill_to_serving, 50) - 0.5) < 1e-9 and rep.availability == 0.5


def test_slow_turns_are_counted_by_tenth_of_the_run() -> None:
    """A run that slows as the store grows shows its slow turns in the last tenths."""
    from tests.chaos.slow import SlowTurn, by_tenth

    def slow(t: float) -> SlowTurn:
        return SlowTurn(_op(f"x{t}", t0=t), 3.0, "tool_end→end", 2.0, (t, t + 2), (), 1)

    turns = [slow(t) for t in (100.0, 150.0, 905.0, 990.0, 1100.0)]
    assert by_tenth(turns, 100.0, 1100.0) == "slow turns by tenth of the run: 2 0 0 0 0 0 0 0 2 1"


def test_chat_replies_posted_twice_or_lost_are_violations() -> None:
    """Per chat message: one reply is right, two are a duplicate post, none is lost unless the reply's
    receipt is uncertain, and a reply naming another message is misdirected."""
    from geode.testing.bot_api_server import LocalBotApi
    from tests.chaos.chat import ChatMessage, ChatRecord, check_chat

    chat = -100900
    with LocalBotApi() as api:
        rec = ChatRecord()
        for n in range(5):
            upd = api.push_message(chat, f"chaos-turn-chat1-{n}", sender_id=1001)
            rec.messages.append(
                ChatMessage(f"chat1-{n}", chat, upd["message"]["message_id"], upd["update_id"], 0.0)
            )
        m0, m1, _m2, m3, m4 = rec.messages
        _post(api, chat, "replied chat1-0", m0.message_id)
        _post(api, chat, "replied chat1-1", m1.message_id)
        _post(api, chat, "replied chat1-1", m1.message_id)  # twice
        _post(api, chat, "replied chat1-0", m3.message_id)  # m3 answered with m0's answer
        uncertain = [_receipt("x", ReceiptState.UNCERTAIN).model_copy(update={"operation_id": m4.reply_op})]
        v = check_chat(api, rec, uncertain, "")  # m2: no post and no uncertain receipt
    assert v.messages == 5 and v.replied == 2 and v.uncertain == 1  # m0, and m3 (misdirected)
    assert [d.split()[0] for d in v.duplicate] == ["chat1-1"]
    assert [d.split()[0] for d in v.lost] == ["chat1-2"]
    assert [d.split()[0] for d in v.misdirected] == ["chat1-3"]


def _post(api: object, chat: int, text: str, reply_to: int) -> None:
    """The bot's sendMessage, over HTTP, replying to ``reply_to``."""
    import json
    import urllib.request

    body = json.dumps({"chat_id": chat, "text": text, "reply_to_message_id": reply_to}).encode()
    url = f"{api.base_url}{api.token}/sendMessage"  # type: ignore[attr-defined]
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert json.loads(resp.read())["ok"]
