"""geode.redaction: secrets masked by key and value shape, sizes bounded, output JSON-safe, stable hashes."""

from __future__ import annotations

import json
from enum import Enum

from pydantic import BaseModel

from geode.redaction import MASK, bound, fingerprint, is_secret_key, redact


def test_secret_keys_are_masked_at_any_depth() -> None:
    out = redact(
        {
            "api_key": "abc",
            "Authorization": "Bearer x",
            "headers": {"a": "b"},
            "Cookie": "c=1",
            "nested": {"password": "p", "client_secret": "s", "X-Api-Key": "k", "refresh_token": "r"},
            "max_tokens": 100,
            "input_tokens": 5,
            "name": "ok",
        }
    )
    assert out["api_key"] == out["Authorization"] == out["headers"] == out["Cookie"] == MASK
    assert set(out["nested"].values()) == {MASK}
    assert out["max_tokens"] == 100 and out["input_tokens"] == 5 and out["name"] == "ok"
    assert is_secret_key("token") and not is_secret_key("total_tokens")


def test_secret_looking_values_are_masked_inside_text() -> None:
    text = (
        "key sk-ant-api03-abcdefghijklmnop, slack xoxb-1234567890-abcdef, "
        "auth: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig and ghp_abcdefghijklmnopqrstuvwx url?token=zzz123"
    )
    out = redact({"msg": text})["msg"]
    for secret in ("abcdefghijklmnop", "xoxb-1234567890", "eyJhbGci", "ghp_abcdef", "zzz123"):
        assert secret not in out
    assert "Bearer [REDACTED]" in out and "key " in out


def test_sizes_are_bounded() -> None:
    deep: dict[str, object] = {}
    cur = deep
    for _ in range(20):
        cur["k"] = {}
        cur = cur["k"]  # type: ignore[assignment]
    out = redact(
        {"s": "x" * 10_000, "l": list(range(1000)), "d": {str(i): i for i in range(200)}, "deep": deep}
    )
    assert len(out["s"]) < 4200 and out["s"].endswith("chars]")
    assert len(out["l"]) == 65 and out["l"][-1] == "[+936 items]"
    assert len(out["d"]) == 65
    assert "[depth>8]" in json.dumps(out)


def test_output_is_json_safe_and_redact_never_raises() -> None:
    class Color(Enum):
        RED = "red"

    class M(BaseModel):
        token: str = "t"
        n: int = 1

    class Weird:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    out = redact({"b": b"\x00\x01", "e": Color.RED, "m": M(), "set": {3, 1}, "f": float("nan"), 1: "int key"})
    json.dumps(out)
    assert out["e"] == "red" and out["m"] == {"token": MASK, "n": 1} and out["1"] == "int key"
    assert isinstance(redact(Weird()), str)


def test_bound_keeps_secrets_but_limits_size() -> None:
    out = bound({"api_key": "k", "s": "y" * 20_000}, max_str=100)
    assert out["api_key"] == "k" and len(out["s"]) < 130


def test_fingerprint_is_canonical() -> None:
    assert fingerprint({"b": 1, "a": [1, 2]}) == fingerprint({"a": [1, 2], "b": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert len(fingerprint(None)) == 64
