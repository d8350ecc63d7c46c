"""The checkpoint save's stored digest (``ck_seqfp``, ``geode.records.save_digest``): a retry is a noop, a
different save at a stored seq a conflict, and a digest an earlier release wrote (the canonical JSON's sha256
hex) still recognises a duplicate arriving after the upgrade."""

from __future__ import annotations

from typing import Any

import pytest

from geode.protocol.errors import Conflict
from geode.records.lmdb_env import key, unpack
from geode.records.models import CheckpointSave, CheckpointState
from geode.records.save_digest import TAG, legacy_fingerprint
from geode.redaction import fingerprint
from tests.records.harness import (
    LocalStore,
    lone_store,  # noqa: F401 (the module's store fixture)
)


def _save(seq: int, text: str = "hi", **kw: Any) -> CheckpointSave:
    return CheckpointSave(
        session_id="s1",
        seq=seq,
        base_count=seq - 1,
        new_messages=[{"role": "user", "content": [{"type": "text", "text": text}], "metadata": {}}],
        cognitive_state={"goal": "g", "observations": ["é" * 40]},
        guard_counters={"round_index": seq, "elapsed_s": 0.5},
        meta={"turn_id": "t1", "title": "ünïcode"},
        **kw,
    )


def _stored_digest(store: LocalStore, seq: int) -> bytes:
    renv = store.engine.renv
    with renv.read() as txn:
        got = txn.get(key("s1", seq), db=renv.db("ck_seqfp"))
    assert got is not None
    return bytes(got)


def _write_legacy(store: LocalStore, seq: int, digest: str) -> None:
    renv = store.engine.renv
    store.engine.checkpoints.writer.run(
        lambda txn: txn.put(key("s1", seq), digest.encode(), db=renv.db("ck_seqfp"))
    )


def test_a_retry_is_a_noop_and_other_content_a_conflict(store: LocalStore) -> None:
    first = _save(1)
    assert not store.client.save_checkpoint(first).noop
    assert store.client.save_checkpoint(first).noop  # the same object re-sent (StoreClient._call's retry)
    assert _stored_digest(store, 1).startswith(TAG) and len(_stored_digest(store, 1)) == len(TAG) + 64
    with pytest.raises(Conflict):
        store.client.save_checkpoint(_save(1, "other"))


def test_a_digest_written_the_old_way_still_recognises_a_duplicate(store: LocalStore) -> None:
    """A home written by the previous release: ``ck_seqfp`` holds the sha256 hex of the save's canonical
    JSON. The duplicate of that save (any key order: the legacy digest sorts keys) is a noop, another save
    at that seq a conflict."""
    one, two = _save(1), _save(2)
    store.client.save_checkpoint(one)
    store.client.save_checkpoint(two)
    legacy = fingerprint(two.model_dump(mode="json"))  # what the previous release stored
    assert legacy == legacy_fingerprint(two) and len(legacy) == 64
    _write_legacy(store, 2, legacy)
    _write_legacy(store, 1, fingerprint(one.model_dump(mode="json")))
    assert store.client.save_checkpoint(two).noop
    reordered = two.model_copy(update={"meta": dict(reversed(list(two.meta.items())))})
    assert store.client.save_checkpoint(reordered).noop
    assert store.client.save_checkpoint(one).noop  # a lower seq
    with pytest.raises(Conflict):
        store.client.save_checkpoint(_save(2, "other"))
    with pytest.raises(Conflict):
        store.client.save_checkpoint(_save(1, "other"))
    _write_legacy(store, 2, "0" * 64)  # a legacy digest of another save
    with pytest.raises(Conflict):
        store.client.save_checkpoint(two)


def test_a_frame_bytes_value_is_stored_and_served_as_text(store: LocalStore) -> None:
    """A bin value (UTF-8: the bus refuses any other) is stored as the ``str`` the JSON dump makes of it,
    as before; the state the store serves from its memo of the record it wrote reads the same."""
    save = CheckpointSave(
        session_id="s1",
        seq=1,
        base_count=0,
        new_messages=[{"role": "user", "content": [{"type": "text", "text": b"bin text"}]}],
        cognitive_state={"goal": b"g", b"k": [b"", 1.5]},
        meta={"title": b"t"},
    )
    ck = store.engine.checkpoints
    # as the store's handler writes a save decoded from a frame (a client that packs bytes values)
    assert ck.writer.run(lambda txn: ck._save_body(txn, save))["noop"] is False
    assert ck.writer.run(lambda txn: ck._save_body(txn, save))["noop"] is True
    restored = ck.load("s1")  # the state from the memo of the record the save wrote
    assert restored is not None
    assert restored.messages == [{"role": "user", "content": [{"type": "text", "text": "bin text"}]}]
    assert restored.state.cognitive_state == {"goal": "g", "k": ["", 1.5]}
    assert restored.state.meta == {"title": "t"}
    renv = store.engine.renv
    with renv.read() as txn:
        raw = txn.get(key("s1"), db=renv.db("ck_state"))
    assert raw is not None
    assert ck.state("s1") == CheckpointState.model_validate(unpack(raw))
