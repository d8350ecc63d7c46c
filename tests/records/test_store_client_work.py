"""The store client sends the model it holds (validated when it was made) instead of dumping and
re-validating it before each write (issue 34): per write one validation of the body, the receiver's."""

from __future__ import annotations

from typing import Any

import pytest

from geode.protocol import store as m
from geode.records.models import TurnRecord
from tests.records.harness import (
    LocalStore,
    lone_store,  # noqa: F401 (the module's store fixture)
)
from tests.records.test_store_write_work import _save, _tool_rows


def test_the_client_sends_its_model_without_revalidating_it(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per write, one validation of the body: the store's (the receiver's); the client validated the model
    it holds when it was made."""
    validated: list[str] = []
    for model in (m.SaveCheckpoint, m.AppendTimeline, m.PutTurn):
        real = getattr(model.model_validate, "__func__")  # noqa: B009

        def counted(cls: Any, *a: Any, _real: Any = real, **kw: Any) -> Any:
            validated.append(cls.__name__)
            return _real(cls, *a, **kw)

        monkeypatch.setattr(model, "model_validate", classmethod(counted))
    store.client.save_checkpoint(_save(1, 0, pending=True))
    store.client.append_timeline(_tool_rows(0)[0])
    store.client.put_turn(TurnRecord(turn_id="t1", session_id="s1", input={"text": "hi"}))
    for name in ("SaveCheckpoint", "AppendTimeline", "PutTurn"):
        assert validated.count(name) <= 1, f"{name} validated {validated.count(name)} times for one write"
    restored = store.client.load_checkpoint("s1")
    assert restored is not None and restored.state.pending_batch is not None
    assert store.client.get_turn("t1") is not None
