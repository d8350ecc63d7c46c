"""A checkpoint save decoded from a frame is dumped without pydantic walking its free-form fields (messages,
cognitive state, guard counters, model settings, meta), and its digest is taken over the pieces the store
packs to write (issue 34, ``geode.records.save_digest``): the same stored bytes and the same digest as the
full ``model_dump(mode="json")`` gives, so a value msgpack decodes besides JSON types (a bin, NaN, an
infinity, a bytes key) is stored as before."""

from __future__ import annotations

import json
import math
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geode.records.models import CheckpointSave, CheckpointState
from geode.records.save_digest import pack_text, packed_save, record_bytes
from geode.redaction import canonical_plain_json, canonical_strict_json

_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=40)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_free = st.dictionaries(st.text(max_size=8), _values, max_size=5)


def _same_as_full(save: CheckpointSave) -> None:
    """The frame path's dump packs as the full dump does, field by field; the same messages and digest."""
    dumped, msgs, entries, digest = packed_save(save, True)
    full, full_msgs, full_entries, full_digest = packed_save(save, False)
    assert full == save.model_dump(mode="json")
    assert (msgs, entries, digest) == (full_msgs, full_entries, full_digest)
    assert {k: pack_text(v) for k, v in dumped.items()} == {k: pack_text(v) for k, v in full.items()}


def _decoded(**fields: Any) -> CheckpointSave:
    """A save as the store receives it: its fields packed and unpacked as a frame's body is."""
    body = msgpack.unpackb(msgpack.packb(fields), raw=False, strict_map_key=True)
    return CheckpointSave.model_validate(body)


@settings(max_examples=150, deadline=None)
@given(cognitive=_free, meta=_free, settings_=_free, messages=st.lists(_free, max_size=3))
def test_a_decoded_save_dumps_and_digests_as_the_full_dump_does(
    cognitive: dict[str, Any], meta: dict[str, Any], settings_: dict[str, Any], messages: list[dict[str, Any]]
) -> None:
    save = _decoded(
        session_id="s1",
        seq=3,
        base_count=2,
        new_messages=messages,
        cognitive_state=cognitive,
        guard_counters={"round_index": 2, "elapsed_s": 0.25, "cost_warned": False},
        model_settings=settings_,
        meta=meta,
        session_created_at=1.5,
    )
    _same_as_full(save)


def test_json_values_are_taken_as_they_are_not_dumped_again() -> None:
    save = _decoded(
        session_id="s1",
        seq=1,
        base_count=0,
        new_messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        cognitive_state={"goal": "g", "observations": ["a", "b"], "round_count": 1},
        meta={"turn_id": "t1"},
    )
    _same_as_full(save)
    dumped, msgs, _, digest = packed_save(save, True)
    assert dumped["cognitive_state"] is save.cognitive_state  # not walked by the serializer
    assert dumped["new_messages"] is save.new_messages
    assert packed_save(save, False)[0]["cognitive_state"] is not save.cognitive_state
    assert digest.startswith(b"p1:") and len(digest) == 67
    assert [msgpack.unpackb(m) for m in msgs] == save.new_messages


@pytest.mark.parametrize(
    "odd",
    [b"text bytes", b"", float("nan"), float("inf"), -float("inf"), {b"key": 1}],
    ids=["bytes", "empty-bytes", "nan", "inf", "-inf", "bytes-key"],
)
def test_a_value_that_is_not_json_is_stored_as_the_full_dump_stores_it(odd: Any) -> None:
    """What the bus's decoder makes besides JSON types (UTF-8 bins, NaN, infinities, bytes keys; never an
    extension object or a tuple: see the decoder test below)."""
    save = CheckpointSave(session_id="s1", seq=1, base_count=0, cognitive_state={"odd": odd, "x": [1]})
    _same_as_full(save)
    save = CheckpointSave(session_id="s1", seq=1, base_count=0, new_messages=[{"odd": [odd]}])
    _same_as_full(save)
    stored = msgpack.unpackb(packed_save(save, True)[1][0], raw=False)
    assert stored == save.model_dump(mode="json")["new_messages"][0]


def test_key_order_is_part_of_the_digest_and_content_is() -> None:
    """Order-sensitive by design (a retry re-sends the same object: docs/records.md)."""
    one = _decoded(session_id="s1", seq=2, base_count=0, meta={"a": 1, "b": 2})

    def digest(**update: Any) -> bytes:
        return packed_save(one.model_copy(update=update), True)[3]

    assert packed_save(one, True)[3] == digest()
    assert packed_save(one, True)[3] != digest(meta={"b": 2, "a": 1})
    assert packed_save(one, True)[3] != digest(meta={"a": 1, "b": 3})
    assert packed_save(one, True)[3] != digest(base_count=1)


@settings(max_examples=100, deadline=None)
@given(cognitive=_free, meta=_free, old_meta=_free)
def test_the_state_record_is_packed_from_the_saves_entries_as_the_whole_map_packs(
    cognitive: dict[str, Any], meta: dict[str, Any], old_meta: dict[str, Any]
) -> None:
    save = _decoded(session_id="s1", seq=4, base_count=2, new_messages=[{"a": 1}], cognitive_state=cognitive)
    dumped, _, entries, _ = packed_save(save, True)
    merged = {**old_meta, **meta}
    record = {
        "session_id": "s1",
        "seq": 4,
        "message_count": 3,
        "status": dumped["status"],
        "cognitive_state": dumped["cognitive_state"],
        "guard_counters": dumped["guard_counters"],
        "pending_batch": dumped["pending_batch"],
        "model_settings": dumped["model_settings"],
        "meta": merged,
        "created_at": 1.25,
        "updated_at": 2.5,
    }
    assert list(record) == list(CheckpointState.model_fields)
    assert record_bytes(entries, merged, 1.25, 2.5) == pack_text(record)


@settings(max_examples=200, deadline=None)
@given(value=_values)
def test_the_canonical_encoders_write_what_json_dumps_writes(value: Any) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    assert canonical_plain_json(value) == expected
    finite = json.dumps(value, allow_nan=True) == json.dumps(value, allow_nan=True).replace("NaN", "")
    if finite and "Infinity" not in json.dumps(value):
        assert canonical_strict_json(value) == expected


def test_the_strict_encoder_refuses_what_is_not_json() -> None:
    for odd in (b"x", math.nan, -math.inf, object(), {b"k": 1}):
        with pytest.raises((TypeError, ValueError)):
            canonical_strict_json({"a": [odd]})
    assert canonical_plain_json({"b": b"x", "a": math.nan}) == '{"a":NaN,"b":"b\'x\'"}'


def test_a_save_through_the_store_builds_no_reply_model_and_answers_as_before(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the store's handler (a frame's save) the reply is its body map: no ``SaveResult`` built in the
    store to be dumped again (1 a save before), the client gets the same ``SaveResult``, a retry a noop."""
    import geode.records.checkpoints as checkpoints
    from geode.home import GeodeHome
    from geode.records.models import SaveResult, SessionStatus
    from tests.records.harness import local_store

    built: list[int] = []

    class Counted(SaveResult):
        def __init__(self, **data: Any) -> None:
            built.append(1)
            super().__init__(**data)

    monkeypatch.setattr(checkpoints, "SaveResult", Counted)
    store = local_store(GeodeHome(tmp_path / "h").ensure())
    try:
        save = CheckpointSave(
            session_id="s1",
            seq=1,
            base_count=0,
            new_messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}], "metadata": {}}],
            cognitive_state={"goal": "g", "observations": ["x" * 300]},
            meta={"title": "ünïcode"},
        )
        first = store.client.save_checkpoint(save)
        again = store.client.save_checkpoint(save)
        expected = SaveResult(
            session_id="s1", seq=1, message_count=1, status=SessionStatus.ACTIVE, receipts_open=False
        )
        assert first == expected
        assert again == expected.model_copy(update={"noop": True})
        assert built == []
        done = save.model_copy(
            update={"seq": 2, "base_count": 1, "new_messages": [], "status": SessionStatus.COMPLETED}
        )
        assert store.client.save_checkpoint(done).status == SessionStatus.COMPLETED
        direct = store.engine.checkpoints.save(done.model_copy(update={"seq": 3}))  # in-process: the model
        assert direct.seq == 3
        assert len(built) == 1
    finally:
        store.engine.close()


def test_the_frame_decoder_still_makes_only_what_the_save_path_assumes() -> None:
    """``packed_save(save, wire=True)`` takes a frame's values as they are: that holds because the bus's
    decoder makes str keys or bytes ones (UTF-8, packed as text), no extension objects (msgpack would pack
    one as it is, where the full dump refuses it)."""
    from geode.protocol.errors import BadRequest
    from geode.protocol.frame_unpack import unpack_map

    body = unpack_map(msgpack.packb({"a": [1, [2, {"b": [3]}]], "c": {"d": "e"}}), 1 << 20)
    assert type(body["a"]) is list and type(body["a"][1]) is list and type(body["a"][1][1]["b"]) is list
    with pytest.raises(BadRequest):
        unpack_map(msgpack.packb({"x": msgpack.ExtType(1, b"y")}), 1 << 20)
    with pytest.raises(BadRequest):
        unpack_map(msgpack.packb({1: "int key"}), 1 << 20)


def test_a_save_builds_no_state_model_and_a_read_gets_the_stored_record(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store remembers the record it wrote as its fields: saves of a session build no ``CheckpointState``
    (one a save before, ~1 % of the store's samples); the first read builds the same model validating the
    stored bytes gives."""
    import geode.records.checkpoints as checkpoints
    from geode.home import GeodeHome
    from geode.records.lmdb_env import key, unpack
    from geode.records.models import CheckpointState
    from tests.records.harness import local_store

    built: list[str] = []

    class Counted(CheckpointState):
        @classmethod
        def model_construct(cls, *a: Any, **kw: Any) -> Any:
            built.append("construct")
            return CheckpointState.model_construct(*a, **kw)

        @classmethod
        def model_validate(cls, *a: Any, **kw: Any) -> Any:
            built.append("validate")
            return CheckpointState.model_validate(*a, **kw)

    monkeypatch.setattr(checkpoints, "CheckpointState", Counted)
    store = local_store(GeodeHome(tmp_path / "h").ensure())
    try:
        for seq in range(1, 5):
            save = CheckpointSave(
                session_id="s1",
                seq=seq,
                base_count=seq - 1,
                new_messages=[
                    {"role": "user", "content": [{"type": "text", "text": f"m{seq}"}], "metadata": {}}
                ],
                meta={"n": seq},
            )
            assert store.client.save_checkpoint(save).seq == seq
        assert built == []
        state = store.engine.checkpoints.state("s1")
        assert built == ["construct"] and state is store.engine.checkpoints.state("s1")
        with store.engine.renv.read() as txn:
            raw = txn.get(key("s1"), db=store.engine.renv.db("ck_state"))
        assert state == CheckpointState.model_validate(unpack(raw))
        assert store.client.save_checkpoint(save.model_copy(update={"seq": 5, "base_count": 4})).seq == 5
        assert built == ["construct"]
    finally:
        store.close()
