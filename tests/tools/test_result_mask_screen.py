"""The result redactor's quick pass (geode/tools/result_redaction.py): a string that holds no literal and that
the secret screen rules out is kept without calling ``mask_secrets``; every other string is masked by it, so
the masked result and its counts are what ``mask_secrets`` gives for each string."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import geode.tools.result_redaction as rr
from geode.redaction import mask_secrets
from geode.tools.spec import ToolResult
from tests.records.test_redaction_screen import CASES, FRAGMENTS

LITERALS = ("dotenv-value-1234", "environ-secret-5678")
PIECES = [*FRAGMENTS, *LITERALS, "dotenv-value", "5678", " "]


def _redactor(tmp_path: Path) -> rr.ResultRedactor:
    (tmp_path / ".env").write_text(f"DOTENV_VALUE={LITERALS[0]}\n")
    return rr.ResultRedactor(tmp_path, environ={"MY_SECRET": LITERALS[1], "PLAIN": "plain-value-1234"})


def _expected(red: rr.ResultRedactor, texts: list[str]) -> tuple[list[str], dict[str, int]]:
    counts: Counter[str] = Counter()
    out = []
    for text in texts:
        masked, found = mask_secrets(text, red.literals())
        counts.update(found)
        out.append(masked)
    return out, dict(sorted(counts.items()))


def _check(red: rr.ResultRedactor, texts: list[str]) -> None:
    res = ToolResult(tool_use_id="t", name="read_file", content={"lines": texts, "n": len(texts)})
    content: Any = red.apply(res).content
    masked, counts = _expected(red, texts)
    assert content["lines"] == masked
    assert content.get("redacted", {}) == counts


def test_known_texts_are_masked_as_mask_secrets_masks_them(tmp_path: Path) -> None:
    red = _redactor(tmp_path)
    _check(red, [*CASES, *LITERALS, f"x {LITERALS[0]} y {LITERALS[1]}", "plain-value-1234"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=12).map("".join), max_size=6))
def test_any_texts_are_masked_as_mask_secrets_masks_them(tmp_path_factory: Any, texts: list[str]) -> None:
    _check(_redactor(tmp_path_factory.mktemp("home")), texts)


def test_a_plain_result_asks_mask_secrets_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Most results hold no secret: their strings are kept as they are, no ``mask_secrets`` call (a Counter
    made) per string; a string with a literal or a possible shape still goes through it."""
    red = _redactor(tmp_path)
    calls: list[str] = []

    def counted(text: str, literals: Any = ()) -> Any:
        calls.append(text)
        return mask_secrets(text, literals)

    monkeypatch.setattr(rr, "mask_secrets", counted)
    plain = {"path": "/w/ws", "files": ["/w/ws/data-3.txt", "/w/ws/src/main.py"], "truncated": False}
    out = red.apply(ToolResult(tool_use_id="t", name="glob_files", content=plain))
    assert out.content == plain and calls == []
    secret = {"text": f"key {LITERALS[1]}", "auth": "Authorization: Bearer abcdefgh12345678"}
    out = red.apply(ToolResult(tool_use_id="t", name="read_file", content=secret))
    assert len(calls) == 2 and out.content["redacted"] == {"bearer-token": 1, "env:MY_SECRET": 1}
