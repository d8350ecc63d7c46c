"""Issue 34, session 6 (EXEC2): the tool timeline's rows go to the store as their fields (no ``model_dump``
per row, ~16 us each); the store keeps the same rows as before, a payload holding a model included."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from geode.records import store_client
from geode.records.models import TimelineEvent
from tests.records.harness import (
    LocalStore,
    lone_store,  # noqa: F401 (the module's store fixture)
)


class _Note(BaseModel):
    text: str
    n: int


def test_a_row_is_sent_as_model_dump_gives_it() -> None:
    assert tuple(TimelineEvent.model_fields) == ("session_id", "event_id", "kind", "ts", "payload")
    row = TimelineEvent(session_id="s", event_id="e", kind="tool.called", ts=2.5, payload={"a": [1, "x"]})
    assert store_client._row(row) == row.model_dump()


def test_rows_are_stored_as_before_a_model_in_a_payload_included(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    dumped: list[int] = []
    real = TimelineEvent.model_dump

    def counted(self: TimelineEvent, **kw: object) -> dict[str, object]:
        dumped.append(1)
        return real(self, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(TimelineEvent, "model_dump", counted)
    rows = [
        TimelineEvent.model_construct(
            session_id="s-rows",
            event_id=f"e{i}",
            kind="tool.completed",
            ts=1.0 + i,
            payload={
                "tool_name": "glob_files",
                "summary": {"files": ["a", "b"]},
                "note": _Note(text="t", n=i),
            },
        )
        for i in range(3)
    ]
    assert store.client.append_timelines(rows) == []
    assert dumped == []  # no row dumped by the client (was one model_dump per row)
    stored = [(r.event.event_id, r.event.ts, r.event.payload) for r in store.client.read_timeline("s-rows")]
    assert stored == [
        (
            f"e{i}",
            1.0 + i,
            {"tool_name": "glob_files", "summary": {"files": ["a", "b"]}, "note": {"text": "t", "n": i}},
        )
        for i in range(3)
    ]
