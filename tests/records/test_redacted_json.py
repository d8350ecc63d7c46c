"""A timeline row's payload is screened for secrets once, as one text, when nothing in it needs redacting
(issue 34), and what is stored is exactly what the walk of ``redact`` gives (geode/redacted_json.py)."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import geode.redacted_json as redacted_json_module
import geode.redaction as redaction
from geode.records.models import TimelineEvent
from geode.redacted_json import redacted_json
from geode.redaction import canonical_plain_json, redact
from tests.records.harness import (
    LocalStore,
    lone_store,  # noqa: F401 (the module's store fixture)
)
from tests.records.test_redaction_screen import FRAGMENTS

FILES = "\n".join(f"src/pkg/module_{i}.py" for i in range(40))[:500]


def _walked(obj: Any, **bounds: int) -> str:
    return canonical_plain_json(redact(obj, **bounds))


@pytest.fixture
def screens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the log screen looks at (the screen in front of the secret shapes' regexes)."""
    seen: list[str] = []
    screen = redaction._LOG_SCREEN
    real = type(screen).maybe

    def counted(text: str) -> bool:
        seen.append(text)
        return real(screen, text)

    monkeypatch.setattr(screen, "maybe", counted)
    return seen


def test_a_tool_calls_row_is_screened_once_and_stored_as_the_walk_stores_it(
    store: LocalStore, screens: list[str]
) -> None:
    payload = {
        "tool_name": "glob_files",
        "tool_use_id": "toolu_0001",
        "operation_id": "op-1",
        "turn_id": "turn-abc",
        "step_id": "s1",
        "mode": "IPC",
        "arguments": {"pattern": "**/*.py", "path": ".", "limits": [1, 2.5, None, True]},
        "status": "ok",
        "error_type": None,
        "summary": FILES,
    }
    ev = TimelineEvent(session_id="s1", event_id="e1", kind="tool.completed", ts=1.0, payload=payload)
    store.client.append_timeline(ev)
    assert len(screens) == 1, f"{len(screens)} screens for one row holding no secret (one per string before)"
    row = store.client.read_timeline("s1")[-1]
    assert row.event.payload == payload and not row.corrupt
    expected = _walked(payload, max_str=16384, max_items=256, max_depth=12)
    assert row.payload_hash == hashlib.sha256(expected.encode()).hexdigest()

    # a row that does hold a secret is still masked by the walk, the rest of it kept
    curl = "curl -H 'Authorization: Bearer abcdefgh12345678' https://x"
    leak = {**payload, "summary": curl, "api_key": "k"}
    store.client.append_timeline(
        TimelineEvent(session_id="s1", event_id="e2", kind="tool.completed", ts=2.0, payload=leak)
    )
    stored = store.client.read_timeline("s1")[-1].event.payload
    assert stored["api_key"] == redaction.MASK and "abcdefgh12345678" not in stored["summary"]
    assert "Bearer [REDACTED]" in stored["summary"] and stored["tool_name"] == "glob_files"


KEYS = st.sampled_from(["a", "path", "token", "api_key", "max_tokens", "Authorization", "k" * 300, "x"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join),
    st.text(max_size=12),
    st.binary(max_size=4),
)


def _values() -> st.SearchStrategy[Any]:
    return st.recursive(
        SCALARS,
        lambda inner: st.one_of(
            st.lists(inner, max_size=5),
            st.lists(inner, max_size=3).map(tuple),
            st.dictionaries(KEYS, inner, max_size=5),
            st.dictionaries(st.one_of(st.integers(0, 3), st.booleans()), inner, max_size=2),
        ),
        max_leaves=20,
    )


@settings(max_examples=250, deadline=None)
@given(_values(), st.integers(1, 40), st.integers(1, 6), st.integers(1, 5))
def test_the_text_is_what_the_walk_gives_for_any_value(obj: Any, max_str: int, items: int, deep: int) -> None:
    bounds = {"max_str": max_str, "max_items": items, "max_depth": deep}
    assert redacted_json(obj, **bounds) == _walked(obj, **bounds)


def test_values_the_walk_changes_take_the_walk() -> None:
    bounds = {"max_str": 16, "max_items": 2, "max_depth": 2}
    for obj in (
        {"a": math.nan},
        {"a": (1, 2)},
        {"a": b"xy"},
        {"a": [1, 2, 3]},
        {"a": {"b": {"c": 1}}},
        {"a": "x" * 17},
        {"k" * 257: 1},
        {1: "one"},
        {True: 1},
        {"password": "hunter2"},
        {"a": "sk-ant-abcdefgh1234"},
        {"a": "é Bearer abcdefgh"},
    ):
        assert redacted_json(obj, **bounds) == _walked(obj, **bounds), obj


def test_a_text_the_screen_cannot_clear_is_searched_once_not_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    walks: list[Any] = []
    real = redaction.redact

    def counted(obj: Any, **bounds: int) -> Any:
        walks.append(obj)
        return real(obj, **bounds)

    monkeypatch.setattr("geode.redacted_json.redact", counted)
    bounds = {"max_str": 16384, "max_items": 256, "max_depth": 12}
    # common words that hold a shape's need ("gh", "token", "api", "secret", "sk-", "xox") and no secret
    summary = "src/throughput.py\nsrc/tokenizer.py\nsrc/rapid_api.py\nsecrets.md\ndisk-usage.txt\nxoxo"
    for payload in (
        {"tool_name": "glob_files", "summary": summary, "arguments": {"pattern": "**/*high*"}},
        {"tool_name": "read_file", "summary": "a tokenizer, an api and a github_pat_ too short"},
    ):
        assert redacted_json(payload, **bounds) == _walked(payload, **bounds)
    assert walks == []  # was 2: every such row took the walk (3-8x the cost of the one-text path)

    # a secret in it (after an escaped newline or quote: its string is not verbatim in the text): the walk
    for payload in (
        {"summary": summary + "\nghp_" + "a1B2" * 5},
        {"summary": summary + '\napi_key = "abcdefgh12345678xyz"'},
        {"summary": "token=abcdefgh12345678"},
    ):
        assert redacted_json(payload, **bounds) == _walked(payload, **bounds)
        assert redaction.MASK in redacted_json(payload, **bounds) or "[REDACTED" in redacted_json(
            payload, **bounds
        )
    assert len(walks) == 6


# pieces that put a shape's need or match next to what JSON escapes (newline, quote, backslash, NUL) or not
SEPARATED = st.lists(
    st.sampled_from(
        [*FRAGMENTS, "\n", " ", '"', "=", ":", "\t", "\\", "\x00", "é", "a1B2c3D4e5F6g7H8i9", "12345678:"]
    ),
    max_size=16,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.one_of(SEPARATED, st.integers()),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["a", "b"]), inner)
        ),
        max_leaves=8,
    )
)
def test_a_searched_text_gives_what_the_walk_gives(obj: Any) -> None:
    bounds = {"max_str": 16384, "max_items": 256, "max_depth": 12}
    assert redacted_json(obj, **bounds) == _walked(obj, **bounds)


def test_a_key_naming_a_secret_is_masked_without_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """glob_files' completed row holds ``skipped_credential_files`` (a count): its value is masked as the walk
    masks it, the rest of the row taken as it is (every glob row took the walk before, ~2x the cost)."""
    walks: list[Any] = []
    real = redaction.redact

    def counted(obj: Any, **bounds: int) -> Any:
        walks.append(obj)
        return real(obj, **bounds)

    monkeypatch.setattr("geode.redacted_json.redact", counted)
    bounds = {"max_str": 16, "max_items": 8, "max_depth": 3}
    summary = {"files": ["/ws/a.txt"], "skipped_credential_files": 0, "truncated": False}
    kept = {"tool_name": "glob_files", "summary": summary, "arguments": {"pattern": "a.txt"}}
    for payload in (
        kept,
        {"api_key": "x" * 40, "token": {"deep": {"er": {"than": "bounds"}}}, "password": [1, "two"]},
        {"secret": math.nan, "Authorization": True, "tokens": [1], "max_tokens": 5, "passwd": 0.5},
        {"token": None, "api_key": "", "secret": [], "password": {}, "a": [{"token": 1}, "b"]},
    ):
        before = repr(payload)
        assert redacted_json(payload, **bounds) == _walked(payload, **bounds), payload
        assert repr(payload) == before  # the payload itself is left as it was
    assert walks == []
    assert '"skipped_credential_files":"[REDACTED]"' in redacted_json(kept, **bounds)

    # what the walk must still decide: a value it converts, an empty map too deep, a long key
    for payload in ({"token": (1,)}, {"a": {"b": {"token": {}}}}, {"token" + "k" * 300: 1}):
        assert redacted_json(payload, **bounds) == _walked(payload, **bounds), payload
    assert len(walks) == 3


def test_maps_of_learnt_plain_keys_still_mask_and_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A map whose keys were all seen before (plain: no secret named) has only its values looked at: a
    value over the bounds, a nested secret-named key, a new secret-named key still give what the walk
    gives; the learnt keys stop at their bound."""
    monkeypatch.setattr(redacted_json_module, "_PLAIN_KEYS", set())
    bounds = {"max_str": 16, "max_items": 8, "max_depth": 3}
    row = {"tool_name": "glob_files", "arguments": {"pattern": "a.txt"}, "n": 1}
    assert redacted_json(row, **bounds) == _walked(row, **bounds)
    assert {"tool_name", "arguments", "n", "pattern"} <= redacted_json_module._PLAIN_KEYS
    for payload in (
        {**row, "tool_name": "x" * 17},
        {**row, "arguments": {"pattern": {"token": "abc"}}},
        {**row, "api_key": "abc"},
        {**row, "arguments": {"pattern": [1, (2,)]}},
        {**row, "n": math.inf},
    ):
        assert redacted_json(payload, **bounds) == _walked(payload, **bounds), payload
    assert (
        "api_key" not in redacted_json_module._PLAIN_KEYS and "token" not in redacted_json_module._PLAIN_KEYS
    )

    monkeypatch.setattr(redacted_json_module, "MAX_PLAIN_KEYS", len(redacted_json_module._PLAIN_KEYS))
    redacted_json({"new_key": 1}, **bounds)
    assert "new_key" not in redacted_json_module._PLAIN_KEYS
