"""The scheduled job's chaos checker (tests/chaos/schedule.py) on hand-made evidence: it names an instant with
no outcome, one decided twice (two rows, or a row inside a missed range), an open occurrence, an effect
twice (the same call, or two calls of one turn), an effect without a receipt, a reply posted twice, a done
reply never posted and an uncertain reply whose owner was never killed; a clean run has no violation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from geode.records.models import Receipt, ReceiptIdentity, ReceiptState
from tests.chaos.driver import Kill
from tests.chaos.schedule import JobVerdict, check_job

T0 = datetime(2026, 12, 4, 22, 0, 0, tzinfo=UTC)


def _at(i: int) -> str:
    return (T0 + timedelta(seconds=i)).isoformat().replace("+00:00", "Z")


def _row(i: int, outcome: str = "done", *, hist: tuple[str, ...] = ()) -> dict[str, Any]:
    text = {"done": "done ok (natural)"}.get(outcome, outcome)
    steps = [{"outcome": {"kind": k}} for k in (*hist, outcome)]
    return {
        "type": "occurrence",
        "instant": _at(i),
        "occurrence_id": f"j@{_at(i)}",
        "turn_id": f"t{i}",
        "outcome": outcome,
        "outcome_text": text,
        "history": steps,
    }


def _receipt(op: str, turn: str, fp: str, owner: str = "executor#1", state: str = "committed") -> Receipt:
    ident = ReceiptIdentity(
        session_id=f"s-{turn}", turn_id=turn, step_id="1", tool_name="run_bash", fingerprint=fp
    )
    return Receipt(
        operation_id=op, identity=ident, state=ReceiptState(state), owner=owner, created_at=0, updated_at=0
    )


def _clean() -> tuple[dict[str, Any], list[str], dict[str, str], list[Receipt], list[dict[str, Any]]]:
    runs = {"runs": [_row(i) for i in range(1, 4)], "truncated": False}
    calls = {f"toolu_chaos_job_{i}": f"fp{i}" for i in range(1, 4)}
    receipts = [_receipt(f"op{i}", f"t{i}", f"fp{i}") for i in range(1, 4)]
    posts = [{"text": f"applied toolu_chaos_job_{i}"} for i in range(1, 4)]
    return runs, list(calls), calls, receipts, posts


def _judge(**change: Any) -> JobVerdict:
    runs, effects, calls, receipts, posts = _clean()
    kills = change.pop("kills", [])
    args = {"runs": runs, "effects": effects, "calls": calls, "receipts": receipts, "posts": posts} | change
    window = (T0 + timedelta(seconds=1), T0 + timedelta(seconds=3))
    return check_job(
        args["runs"], window, args["effects"], args["calls"], args["receipts"], args["posts"], kills
    )


def kinds(v: JobVerdict) -> list[str]:
    return sorted(k for k, _ in v.violations)


def test_a_clean_run_has_no_violation() -> None:
    v = _judge()
    assert v.violations == [] and v.instants == 3 and v.outcomes["done"] == 3


def test_instants_without_an_outcome_or_with_two_are_named() -> None:
    runs, *_ = _clean()
    gap = {"runs": [runs["runs"][0], runs["runs"][2]], "truncated": False}
    assert kinds(_judge(runs=gap)) == ["undecided"]
    twice = {"runs": [*runs["runs"], _row(2, "skipped")], "truncated": False}
    assert kinds(_judge(runs=twice)) == ["decided_twice"]
    missed = {"type": "missed", "missed": {"first": _at(3), "last": _at(4), "count": 2}}
    assert kinds(_judge(runs={"runs": [*runs["runs"], missed], "truncated": False})) == ["decided_twice"]
    still = {"runs": [*runs["runs"][:2], _row(3, "due")], "truncated": False}
    assert kinds(_judge(runs=still)) == ["undecided"]


def test_effects_twice_or_without_receipt_are_named() -> None:
    _, effects, calls, receipts, _ = _clean()
    assert kinds(_judge(effects=[*effects, effects[0]])) == ["duplicate"]
    again = calls | {"toolu_chaos_job_9": "fp9"}
    one_turn_twice = [*receipts, _receipt("op9", "t1", "fp9")]
    assert kinds(_judge(effects=[*effects, "toolu_chaos_job_9"], calls=again, receipts=one_turn_twice)) == [
        "duplicate"
    ]
    assert kinds(_judge(effects=[*effects, "toolu_chaos_job_8"])) == ["lost"]


def test_posts_twice_or_missing_and_unexplained_uncertain_are_named() -> None:
    runs, _, _, receipts, posts = _clean()
    assert kinds(_judge(posts=[*posts, posts[1]])) == ["duplicate_post"]
    assert kinds(_judge(posts=posts[:2])) == ["lost_reply"]
    unsure = {"runs": [*runs["runs"][:2], _row(3, "uncertain", hist=("due",))], "truncated": False}
    reply = _receipt("reply-t3", "t3", "fpr", owner="executor#2", state="uncertain")
    assert kinds(_judge(runs=unsure, posts=posts[:2], receipts=[*receipts, reply])) == [
        "unexplained_uncertain"
    ]
    killed = [Kill(0.0, 0.0, "executor", 1, 2)]
    assert _judge(runs=unsure, posts=posts[:2], receipts=[*receipts, reply], kills=killed).violations == []
    assert kinds(_judge(runs=unsure, posts=posts[:2], kills=killed)) == [
        "unexplained_uncertain"
    ]  # no receipt
