"""A reply is split on line boundaries into parts a platform accepts; a turn without an answer says so."""

from __future__ import annotations

import random

import pytest

from geode.messengers.replies import TELEGRAM_LIMIT, reply_text, split_reply, text_limit


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _rejoined_without_newlines(parts: list[str]) -> str:
    return "".join(parts).replace("\n", "")


def test_a_short_reply_is_one_part_unchanged() -> None:
    assert split_reply("Hello\n\nworld") == ["Hello\n\nworld"]
    assert split_reply("x" * TELEGRAM_LIMIT) == ["x" * TELEGRAM_LIMIT]


def test_a_long_reply_splits_on_line_boundaries() -> None:
    lines = [f"line {i:04d} " + "." * 60 for i in range(200)]  # ~14,000 chars
    text = "\n".join(lines)
    parts = split_reply(text)
    assert len(parts) == 4 and all(len(p) <= TELEGRAM_LIMIT for p in parts)
    assert "\n".join(parts) == text  # only the newlines split on are gone, none mid-line
    assert [ln for p in parts for ln in p.split("\n")] == lines
    assert all(len(p) + 1 + len(lines[0]) > TELEGRAM_LIMIT for p in parts[:-1])  # each part is filled


def test_a_single_over_long_line_is_cut_hard() -> None:
    text = "head\n" + "y" * 10_000 + "\ntail"
    parts = split_reply(text)
    assert all(len(p) <= TELEGRAM_LIMIT for p in parts)
    assert parts[0] == "head" and parts[1] == "y" * TELEGRAM_LIMIT and parts[2] == "y" * TELEGRAM_LIMIT
    assert parts[3] == "y" * (10_000 - 2 * TELEGRAM_LIMIT) + "\ntail"  # the rest goes on with what follows
    assert _rejoined_without_newlines(parts) == text.replace("\n", "")


def test_limits_count_utf16_units_and_never_split_a_character() -> None:
    text = "\U0001f600" * 3000  # 6,000 UTF-16 units in one line
    parts = split_reply(text)
    assert [_units(p) for p in parts] == [4096, 6000 - 4096] and "".join(parts) == text


def test_no_empty_parts() -> None:
    assert split_reply("") == [] and split_reply("\n\n  \n") == []
    parts = split_reply("a" * 4096 + "\n\n\n" + "b", limit=4096)
    assert parts == ["a" * 4096, "b"]  # the blank lines at the split go with it


@pytest.mark.parametrize("seed", range(20))
def test_random_texts_keep_every_line_and_the_limit(seed: int) -> None:
    rng = random.Random(seed)
    limit = rng.choice([8, 50, 300])
    alphabet = "ab c\u00e9\U0001f600"
    lines = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, limit * 2))) for _ in range(40)]
    text = "\n".join(lines)
    parts = split_reply(text, limit)
    assert all(0 < _units(p) <= limit and p.strip() for p in parts)
    blank_free = [ln for ln in text.split("\n") if ln.strip()]
    assert _rejoined_without_newlines(parts).replace(" ", "") == "".join(blank_free).replace(" ", "")


def test_reply_text_is_the_answer_or_how_the_turn_ended() -> None:
    assert reply_text({"text": "4", "termination_reason": "natural"}) == "4"
    assert reply_text({"text": "", "termination_reason": "time_budget_expired", "error": "boom /etc/x"}) == (
        "The turn ended without an answer (time_budget_expired)."
    )
    assert reply_text({"text": "  ", "termination_reason": "user_cancelled"}).endswith("(user_cancelled).")
    assert reply_text({}) == "The turn ended without an answer (unknown)."


def test_paragraphs_stay_whole_when_they_fit() -> None:
    paragraphs = ["\n".join(f"p{i} line {k} " + "." * 40 for k in range(6)) for i in range(12)]  # ~300 each
    parts = split_reply("\n\n".join(paragraphs), 1000)
    assert [p for part in parts for p in part.split("\n\n")] == paragraphs  # never cut inside one
    assert all(len(p) <= 1000 for p in parts) and len(parts) == 4  # three to a part


def test_a_code_block_stays_whole_or_is_closed_and_reopened_across_parts() -> None:
    block = "```python\n" + "\n".join(f"x_{i} = {i}" for i in range(40)) + "\n```"
    text = "intro " * 30 + "\n\n" + block + "\n\nafter"
    parts = split_reply(text, 300)
    assert parts[0].strip() == ("intro " * 30).strip() and parts[-1] == "after"
    code = parts[1:-1]
    assert len(code) > 1 and all(len(p) <= 300 for p in code)
    assert all(p.startswith("```python\n") and p.endswith("\n```") for p in code)  # each renders as code
    body = [ln for p in code for ln in p.split("\n")[1:-1]]
    assert body == [f"x_{i} = {i}" for i in range(40)]
    small = "text\n\n```\na\n\nb\n```"  # a blank line inside a block is not a paragraph boundary
    assert split_reply(small + "\n\n" + "z" * 20, 22) == [small, "z" * 20]


def test_each_platform_has_its_limit() -> None:
    assert (text_limit("telegram"), text_limit("slack"), text_limit("discord")) == (4096, 4000, 2000)
