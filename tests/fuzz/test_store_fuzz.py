"""Fuzz every ``store.*`` message against a real store (start_store on a temp home, over the bus):
an invalid body is ``bad_request``, nothing is ``internal``, a refused request writes nothing durable,
and the store keeps answering."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from actors.bus import Bus
from actors.store import StoreChild, start_store
from geode.home import GeodeHome
from geode.protocol import catalog, runtime
from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest
from geode.records.settings import StoreConfig
from tests.fuzz.budget import fuzz, values

SPECS = {t: s for t, s in catalog.load_all().items() if t.startswith("store.")}  # with store.schedule.*
odd = st.sampled_from(
    [-1, 0, 1, 2**31, 2**63 - 1, 2**63, 2**64 - 1, -(2**63), 1e308, float("inf"), float("nan"), "", "x" * 300]
)
field_value = values | odd | st.text(min_size=1, max_size=24)


def shaped(model: type[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Bodies with the model's own keys (by alias) holding random or boundary values."""
    keys = [f.alias or name for name, f in model.model_fields.items()]
    return st.fixed_dictionaries({}, optional={k: field_value for k in keys})


# mostly-valid bodies: small id pools so requests meet records earlier ones wrote; unbounded ints at u64 edges
ids = st.sampled_from(["s1", "s2", "op1", "op2", "t1", "a\x00b", "ü" * 3]) | st.text(min_size=1, max_size=8)
anyid = ids | st.just("")
nat = st.sampled_from([0, 1, 2, 2**32, 2**63 - 1, 2**63, 2**64 - 1]) | st.integers(0, 2**64 - 1)
num = nat | st.floats(allow_nan=False) | st.integers(-(2**63), -1)
blob = st.dictionaries(st.text(max_size=8), values, max_size=3)
msgs = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": values}))
identity = st.fixed_dictionaries(
    {"session_id": anyid, "turn_id": anyid, "step_id": anyid, "tool_name": anyid, "fingerprint": anyid}
)
jobs = st.sampled_from(["j1", "j2", "bad job", ""])
instants = st.sampled_from(["2027-01-01T00:00:00Z", "2027-01-01T01:00:00Z", "2027-01-01T00:00:00.5Z", "x"])
outcomes = st.fixed_dictionaries(
    {"kind": st.sampled_from(["done", "delivering", "delivery_failed", "uncertain", "skipped", "due"])},
    optional={"result": st.sampled_from(["ok", "error"]), "reason": anyid, "operation_id": ids},
)
VALID: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "store.checkpoint.load": st.fixed_dictionaries({"session_id": ids}, optional={"from_index": nat}),
    "store.checkpoint.save": st.fixed_dictionaries(
        {"session_id": anyid, "seq": nat, "base_count": nat},
        optional={
            "new_messages": msgs,
            "status": st.sampled_from(["active", "paused", "completed", "error", "bogus"]),
            "reopen": st.booleans(),
            "cognitive_state": blob,
            "meta": blob,
            "pending_batch": blob | st.none(),
        },
    ),
    "store.cursor.get": st.fixed_dictionaries({"platform": ids, "channel": ids}, optional={"account": anyid}),
    "store.cursor.set": st.fixed_dictionaries(
        {"platform": ids, "channel": ids, "position": anyid}, optional={"account": anyid}
    ),
    "store.dedupe": st.fixed_dictionaries(
        {"key": ids, "ttl_s": st.floats(0, 366 * 86400) | st.integers(0, 366 * 86400)},
        optional={"token": anyid},
    ),
    "store.evidence.append": st.fixed_dictionaries(
        {"session_id": ids, "kind": ids},
        optional={"payload": blob, "turn_id": anyid, "call_id": anyid, "summary": anyid},
    ),
    "store.receipt.admit": st.fixed_dictionaries(
        {"operation_id": ids, "identity": identity},
        optional={"owner": anyid, "effect": anyid, "attempt": anyid},
    ),
    "store.receipt.commit": st.fixed_dictionaries({"operation_id": ids}, optional={"result": blob}),
    "store.receipt.get": st.fixed_dictionaries({"operation_id": ids}),
    "store.receipt.list": st.fixed_dictionaries(
        {}, optional={"session_id": anyid, "uncertain_only": st.booleans(), "limit": st.integers(1, 2000)}
    ),
    "store.receipt.owner_died": st.fixed_dictionaries({"name": ids, "incarnation": nat}),
    "store.receipt.reconcile": st.fixed_dictionaries(
        {"operation_id": ids, "outcome": st.sampled_from(["applied", "not_applied", "not-applied"])},
        optional={"by": anyid, "note": anyid},
    ),
    "store.receipt.uncertain": st.fixed_dictionaries({"operation_id": ids}, optional={"reason": anyid}),
    "store.sessions.list": st.fixed_dictionaries({}, optional={"limit": st.integers(1, 5000)}),
    "store.timeline.append": st.fixed_dictionaries(
        {"session_id": anyid, "event_id": anyid, "kind": anyid, "ts": num}, optional={"payload": blob}
    ),
    "store.timeline.read": st.fixed_dictionaries(
        {"session_id": ids}, optional={"after_seq": nat, "limit": st.integers(1, 10000)}
    ),
    "store.turn.get": st.fixed_dictionaries({"turn_id": ids}),
    "store.turn.list": st.fixed_dictionaries(
        {},
        optional={
            "state": st.sampled_from(["queued", "running", "done"]),
            "session_id": anyid,
            "offset": nat,
            "limit": st.integers(1, 500),
        },
    ),
    "store.turn.put": st.fixed_dictionaries(
        {"turn_id": anyid, "session_id": anyid},
        optional={
            "state": st.sampled_from(["queued", "running", "done"]),
            "input": blob,
            "worker": anyid | st.none(),
            "incarnation": num | st.none(),
            "attempts": num,
            "outcome": blob | st.none(),
            "created_at": num,
            "updated_at": num,
        },
    ),
    "store.stats": st.just({}),
    "store.prune": st.just({}),
    **{
        t: st.fixed_dictionaries(
            {"job_id": jobs, "holder": ids},
            optional={"instant": instants, "request_id": anyid, "lease_s": num},
        )
        for t in ("store.schedule.claim", "store.schedule.due")
    },
    "store.schedule.outcome": st.fixed_dictionaries(
        {"job_id": jobs, "instant": instants, "outcome": outcomes}, optional={"by": ids}
    ),
    "store.schedule.missed": st.fixed_dictionaries(
        {
            "job_id": jobs,
            "missed": st.fixed_dictionaries(
                {"kind": st.just("missed"), "count": nat, "first": instants, "last": instants}
            ),
        }
    ),
    "store.schedule.job.put": st.fixed_dictionaries(
        {"job_id": jobs, "definition": blob}, optional={"expect_revision": nat}
    ),
}


def nearly(type_: str) -> st.SearchStrategy[dict[str, Any]]:
    """A mostly-valid body with, now and then, one field replaced by a random value or removed."""
    base = VALID.get(type_, st.just({}))
    keys = [f.alias or n for n, f in SPECS[type_].body.model_fields.items()]
    if not keys:
        return base
    return st.tuples(
        base, st.sampled_from(keys), st.sampled_from(["keep", "keep", "swap", "drop"]), field_value
    ).map(
        lambda t: (
            t[0]
            if t[2] == "keep"
            else {**{k: v for k, v in t[0].items() if k != t[1]}, **({t[1]: t[3]} if t[2] == "swap" else {})}
        )
    )


bodies = st.sampled_from(sorted(SPECS)).flatmap(
    lambda t: st.tuples(
        st.just(t),
        st.one_of(
            nearly(t),
            nearly(t),
            shaped(SPECS[t].body),
            st.dictionaries(st.text(max_size=12), values, max_size=5),
        ),
    )
)


@dataclass
class Rig:
    store: StoreChild
    client: Bus

    def ask(self, type_: str, body: dict[str, Any]) -> Envelope:
        return self.client.request("store", Envelope(type=type_, body=body), timeout_s=10)

    def durable(self) -> dict[str, int]:
        return dict(self.store.engine.renv.stats()["entries"])


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    home = GeodeHome(Path(tmp_path_factory.mktemp("store-fuzz")) / "h").ensure()
    store = start_store(home, config=StoreConfig(prune_interval_s=0, handlers=4))
    client = Bus("fuzz", 1, home).start()
    try:
        yield Rig(store, client)
    finally:
        client.stop()
        store.stop()


@fuzz(150, shrink=False)
@given(case=bodies)
@example(  # found by this fuzzer: a non-UTF-8 bin value failed inside the write as `internal`
    case=("store.checkpoint.save", {"session_id": "s9", "seq": 1, "base_count": 0, "meta": {"": [b"\x80"]}})
)
@example(
    case=(
        "store.timeline.append",
        {"session_id": "s9", "event_id": "e", "kind": "k", "ts": 0, "payload": {"b": b"\xc3"}},
    )
)
def test_store_answers_every_body_and_refusals_write_nothing(
    rig: Rig, case: tuple[str, dict[str, Any]]
) -> None:
    type_, body = case
    try:
        catalog.parse_body(type_, body)
        valid = True
    except BadRequest:
        valid = False
    before = rig.durable()
    reply = rig.ask(type_, body)
    code = reply.body.get("code") if reply.kind == "error" else None
    event(f"{'valid' if valid else 'invalid'} -> {code or reply.kind}")
    assert code != "internal", f"{type_} {body!r}: {reply.body}"
    if not valid:
        assert code == "bad_request", f"{type_} {body!r} was not refused: {reply.kind} {reply.body}"
    if reply.kind == "error":
        assert rig.durable() == before, f"{type_} {body!r} was refused ({code}) but wrote"


def test_store_still_answers_after_the_fuzz(rig: Rig) -> None:
    reply = rig.ask(runtime.PING, {})
    assert reply.kind == "ok" and reply.body["name"] == "store"
