"""The quick screen in front of the secret shapes (issue 34) changes no result: redact_text and mask_secrets
give exactly what running every shape's regex over the text gives, Unicode case folding included."""

from __future__ import annotations

import dataclasses
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from geode import secret_screen
from geode.redaction import _LOG_SHAPES, MASK, SHAPES, Shape, _truncate, mask_secrets, redact_text


def _unscreened(shape: Shape) -> Shape:
    bare = dataclasses.replace(shape, needs=(), gate=None)
    object.__setattr__(bare, "min_len", 0)
    return bare


LOG_BARE = tuple(_unscreened(s) for s in _LOG_SHAPES)
RESULT_BARE = tuple(_unscreened(s) for s in SHAPES)


def _reference_log(text: str) -> str:
    for shape in LOG_BARE:
        text = shape.sub(text, MASK)
    return _truncate(text, 4096)


def _reference_result(text: str) -> tuple[str, Counter[str]]:
    counts: Counter[str] = Counter()
    for shape in RESULT_BARE:
        text = shape.sub(text, f"[REDACTED:{shape.label}]", counts)
    return text, counts


CASES = [
    "",
    "plain words and src/pkg/module_1.py:12: def f(x): return x",
    "Authorization: Bearer abcdefgh12345678",
    "AUTHORIZATION: BEARER abcdefgh12345678",
    "Basic dXNlcjpwYXNzd29yZA==",
    "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlc2ln",
    "sk-ant-api03-abcdefghijkl and sk-proj-abcdefghij",
    "ghp_abcdefghijklmnopqrstuvwx github_pat_abcdefghijklmnopqrstuvwxyz",
    "xoxb-1234567890-abcdef xapp-1-abcdef",
    "AKIAABCDEFGHIJKLMNOP",
    "aws_secret_access_key = abcdEFGH1234abcdEFGH1234",
    "SECRET_ACCESS_KEY: abcdEFGH1234abcdEFGH1234",
    "\u017fecret_access_key=abcdEFGH1234abcdEFGH1234",  # long s folds to s under IGNORECASE
    "ap\u0131_key=abcdEFGH1234abcdEFGH1234",  # dotless i folds to i
    "to\u212aen=abcdEFGH1234abcdEFGH1234",  # Kelvin sign folds to k
    "bot123456789:AAbbCCddEEffGGhhIIjjKKllMMnnOOppQQ",
    "https://api.telegram.org/bot123456789:AAbbCCddEEffGGhhIIjjKKllMMnnOOppQQ/getUpdates",
    "١٢٣٤٥٦٧:AAbbCCddEEffGGhhIIjjKKllMMnnOOppQQ",  # Unicode digits
    "MTIzNDU2Nzg5MDEyMzQ1Njc4OTA.GhIjKl.abcdefghijklmnopqrstuvwxyz0123",
    'client_secret: "abcdEFGH1234abcdEFGH1234"',
    "API_TOKEN=abcdefabcdefabcdefabcdef (no digit) API_TOKEN=abc123abc123abc123abc1",
    "url?token=zzz123&password=hunter2;secret=x",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----\nunterminated",
    "é" * 10 + " Bearer xyzxyzxyz",
]


def test_known_texts_give_what_every_shape_gives() -> None:
    for text in CASES:
        assert redact_text(text) == _reference_log(text), text
        assert mask_secrets(text) == _reference_result(text), text


FRAGMENTS = [
    "sk-",
    "sk-ant-",
    "Bearer ",
    "bEaReR ",
    "Basic ",
    "eyJ",
    "ghp_",
    "github_pat_",
    "xoxb-",
    "xapp-",
    "AKIA",
    "ASIA",
    "token",
    "TOKEN",
    "api_key",
    "apikey",
    "passwd",
    "password",
    "secret",
    "\u017fecret",
    "ap\u0131",
    "to\u212aen",
    "aws_session_token",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "=",
    ": ",
    ":",
    ".",
    "'",
    '"',
    " ",
    "\n",
    "/",
    "_",
    "-",
    "1234567",
    "abcdEFGH1234",
    "abcdefghijklmnopqrstuvwxyz",
    "é",
    "٣",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=24).map("".join))
def test_any_text_gives_what_every_shape_gives(text: str) -> None:
    assert redact_text(text) == _reference_log(text)
    assert mask_secrets(text) == _reference_result(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=24).map("".join))
def test_a_gate_gives_the_same_verdict_by_look_behind_and_by_byte_table(text: str) -> None:
    """A gate searches a short text with a regex look-behind and a long one through its byte table (dense
    dots in minified code cost the look-behind 3-4x): both say the same of any text."""
    gates = [s.gate for s in SHAPES if s.gate is not None]
    assert gates
    by_regex = [gate(text) for gate in gates]
    real = secret_screen.LOOK_BEHIND_MAX
    try:
        secret_screen.LOOK_BEHIND_MAX = -1  # every text through the byte table
        assert [gate(text) for gate in gates] == by_regex
    finally:
        secret_screen.LOOK_BEHIND_MAX = real
