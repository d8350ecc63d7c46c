"""Secret masking and bounding for anything written to logs, the timeline or the evidence ledger.

``redact(obj)`` returns a JSON-safe copy with secrets masked and sizes bounded; ``mask_secrets(text)`` masks
the same shapes with a label each (tool results); ``fingerprint(obj)`` is the sha256 of the canonical JSON of
an object (sorted keys, compact separators).

A text is searched only by the shapes it may hold (each shape names the substrings every match contains, or a
cheaper gate): most texts cost a few substring look-ups, not a regex scan per shape; the result is the same.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import functools
import hashlib
import json
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from geode.secret_screen import Screen, min_width, run_gate

MASK = "[REDACTED]"
MAX_STR = 4096
MAX_ITEMS = 64
MAX_DEPTH = 8

# Key names (normalised: lower case, '-' → '_') whose values are always masked.
_SECRET_KEYS = re.compile(
    r"(api_?key|apikey|authorization|auth_?token|access_?token|refresh_?token|id_?token|cookie|set_cookie|"
    r"token|password|passwd|passphrase|secret|client_secret|private_?key|credential|session_?key|x_api_key|"
    r"headers?)",
)


@dataclass(frozen=True)
class Shape:
    """A credential's shape wherever it appears in a string: ``template`` replaces a match (``{mask}`` is the
    mask; backreferences keep a prefix such as ``Bearer ``); ``entropy`` keeps matches whose last group
    lacks a digit or a letter (code such as ``token = self.token_for_the_user``)."""

    label: str
    pattern: re.Pattern[str]
    template: str = "{mask}"
    entropy: bool = False
    # every match contains one of these (lower case when the pattern ignores case): a text with none of them,
    # or shorter than the pattern's shortest match, is not searched (the same result, without the regex scan)
    needs: tuple[str, ...] = ()
    gate: Callable[[str], bool] | None = None  # else: a necessary condition cheaper than the pattern
    min_len: int = field(init=False, default=0)
    folds: bool = field(init=False, default=False)  # the pattern ignores case

    def __post_init__(self) -> None:
        object.__setattr__(self, "min_len", min_width(self.pattern))
        object.__setattr__(self, "folds", bool(self.pattern.flags & re.IGNORECASE))

    def possible(self, text: str) -> bool:
        """False only when the pattern cannot match ``text`` (a case-insensitive pattern checks ``needs`` in
        the lower-cased text, and only in an ASCII one: Unicode case folding matches more than ``lower``)."""
        if len(text) < self.min_len:
            return False
        if self.gate is not None:
            return self.gate(text)
        if self.folds:
            if not text.isascii():
                return True
            text = text.lower()
        for need in self.needs:
            if need in text:
                return True
        return not self.needs

    def sub(self, text: str, mask: str, counts: Counter[str] | None = None) -> str:
        if not self.possible(text):
            return text
        repl = self.template.replace("{mask}", mask)

        def one(m: re.Match[str]) -> str:
            if self.entropy:
                value = m.group(m.lastindex or 0)
                if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
                    return m.group(0)
            if counts is not None:
                counts[self.label] += 1
            return m.expand(repl)

        return self.pattern.sub(one, text)


# The one list of secret shapes: logs, the timeline and the ledger mask them as MASK, tool results as
# "[REDACTED:<label>]" (geode/tools/result_redaction.py). Order matters: a PEM block before what it contains,
# the specific before the generic.
SHAPES: tuple[Shape, ...] = (
    Shape(
        "private-key",
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)"),
        needs=("-----BEGIN ",),
    ),
    Shape(
        "bearer-token",
        re.compile(r"\b(Bearer\s+)[A-Za-z0-9._~+/=\-]{4,}", re.IGNORECASE),
        r"\1{mask}",
        needs=("bearer",),
    ),
    Shape("basic-auth", re.compile(r"\b(Basic\s+)[A-Za-z0-9+/=]{8,}"), r"\1{mask}", needs=("Basic",)),
    Shape(
        "jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), needs=("eyJ",)
    ),
    Shape("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{6,}"), needs=("sk-ant-",)),
    Shape("openai-key", re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"), needs=("sk-",)),  # sk-…, sk-proj-…
    Shape(
        "github-token",
        re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,})"),
        needs=("gh", "github_pat_"),
    ),
    Shape(
        "slack-token",
        re.compile(r"\b(xox[abposre]-[A-Za-z0-9\-]{6,}|xapp-[A-Za-z0-9\-]{6,})"),
        needs=("xox", "xapp-"),
    ),
    Shape("aws-access-key-id", re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), needs=("AKIA", "ASIA")),
    Shape(
        "aws-secret",
        re.compile(
            r"(?i)\b(aws_secret_access_key|aws_session_token|secret_?access_?key)(['\"]?\s*[=:]\s*['\"]?)"
            r"[A-Za-z0-9/+=]{16,}"
        ),
        r"\1\2{mask}",
        needs=("secret", "aws_session_token"),
    ),
    # telegram bot token, also inside a Bot API URL (".../bot<token>/getUpdates", as httpx logs it)
    Shape(
        "telegram-bot-token",
        re.compile(r"(?<![0-9])\d{6,12}:[A-Za-z0-9_\-]{30,}"),
        gate=run_gate(string.digits, 6, ":", ascii_only=True),
    ),
    # discord bot token (base64 user id . timestamp . hmac)
    Shape(
        "discord-bot-token",
        re.compile(r"\b[A-Za-z0-9_\-]{24,28}\.[A-Za-z0-9_\-]{6,7}\.[A-Za-z0-9_\-]{27,}"),
        gate=run_gate(string.ascii_letters + string.digits + "_-", 24, ".", ascii_only=False),
    ),
    # a long, mixed value assigned to a secret-named key ("client_secret": "…", API_TOKEN=…)
    Shape(
        "secret-assignment",
        re.compile(
            r"(?i)\b([A-Za-z0-9_]*(?:api[_-]?key|secret|token|password|passwd)['\"]?\s*[=:]\s*['\"]?)"
            r"([A-Za-z0-9/+_\-.=]{16,})"
        ),
        r"\1{mask}",
        entropy=True,
        needs=("api", "secret", "token", "passw"),
    ),
)
# logs only: any value of api_key=/token=/password=/secret= (a tool result keeps code such as token=tok)
_LOG_SHAPES = (
    *SHAPES,
    Shape(
        "secret-assignment",
        re.compile(r"(?i)\b(api[_-]?key|token|password|secret)=([^\s&;,]+)"),
        r"\1={mask}",
        needs=("api", "token", "passw", "secret"),
    ),
)


_SCREEN = Screen(SHAPES)
_LOG_SCREEN = Screen(_LOG_SHAPES)


def mask_secrets(text: str, literals: Sequence[tuple[str, str]] = ()) -> tuple[str, Counter[str]]:
    """``text`` with every known secret shape, and every ``(label, value)`` literal, replaced by
    ``[REDACTED:<label>]``; and how many of each were replaced."""
    counts: Counter[str] = Counter()
    for label, value in literals:
        if value and value in text:
            counts[label] += text.count(value)
            text = text.replace(value, f"[REDACTED:{label}]")
    if _SCREEN.maybe(text):
        for shape in SHAPES:
            text = shape.sub(text, f"[REDACTED:{shape.label}]", counts)
    return text, counts


def is_secret_key(key: str) -> bool:
    """True when a mapping key names a secret (api_key, Authorization, Cookie, token, password...)."""
    return _secret_key(key)


@functools.lru_cache(maxsize=4096)  # a payload's keys are a few names over and over
def _secret_key(key: str) -> bool:
    norm = key.lower().replace("-", "_")
    if norm in {
        "tokens",
        "max_tokens",
        "input_tokens",
        "output_tokens",
        "token_count",
        "cache_read_tokens",
        "cache_creation_tokens",
        "total_tokens",
        "tokens_used",
    }:
        return False
    if norm.endswith("_tokens"):
        return False
    return _SECRET_KEYS.search(norm) is not None


def redact_text(text: str, max_len: int = MAX_STR) -> str:
    """Mask credential-looking substrings and truncate to ``max_len`` characters."""
    if _LOG_SCREEN.maybe(text):
        for shape in _LOG_SHAPES:
            text = shape.sub(text, MASK)
    return _truncate(text, max_len)


def redact(
    obj: Any, *, max_str: int = MAX_STR, max_items: int = MAX_ITEMS, max_depth: int = MAX_DEPTH
) -> Any:
    """A JSON-safe, bounded copy of ``obj`` with secrets masked. Never raises."""
    try:
        return _redact(obj, 0, max_str, max_items, max_depth)
    except Exception as exc:  # redaction must never break a caller's write path
        return f"[unredactable {type(obj).__name__}: {type(exc).__name__}]"


def _redact(obj: Any, depth: int, max_str: int, max_items: int, max_depth: int, mask: bool = True) -> Any:
    # the exact JSON types first (what a decoded frame holds), each as its isinstance branch below treats it
    kind = type(obj)
    if kind is str:
        return redact_text(obj, max_str) if mask else _truncate(obj, max_str)
    if kind is int or kind is bool or obj is None:
        return obj
    if kind is dict and depth < max_depth:
        return _redact_map(obj, depth, max_str, max_items, max_depth, mask)
    if obj is None or isinstance(obj, bool | int):
        return obj
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else str(obj)
    if isinstance(obj, str):
        return redact_text(obj, max_str) if mask else _truncate(obj, max_str)
    if isinstance(obj, enum.Enum):
        return _redact(obj.value, depth, max_str, max_items, max_depth, mask)
    if isinstance(obj, bytes | bytearray | memoryview):
        raw = bytes(obj)
        return f"[{len(raw)} bytes b64:{base64.b64encode(raw[:48]).decode()}]"
    if depth >= max_depth:
        return f"[depth>{max_depth}]"
    obj = _as_plain(obj)
    if isinstance(obj, Mapping):
        return _redact_map(obj, depth, max_str, max_items, max_depth, mask)
    if isinstance(obj, list | tuple | set | frozenset):
        seq = list(obj) if not isinstance(obj, set | frozenset) else sorted(obj, key=repr)
        items = [_redact(v, depth + 1, max_str, max_items, max_depth, mask) for v in seq[:max_items]]
        if len(seq) > max_items:
            items.append(f"[+{len(seq) - max_items} items]")
        return items
    return redact_text(repr(obj), max_str) if mask else _truncate(repr(obj), max_str)


def _redact_map(
    obj: Mapping[Any, Any], depth: int, max_str: int, max_items: int, max_depth: int, mask: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, (k, v) in enumerate(obj.items()):
        if i >= max_items:
            out["…"] = f"[+{len(obj) - max_items} keys]"
            break
        key = k if isinstance(k, str) else str(k)
        key = key[:256]
        if mask and _secret_key(key) and v not in (None, "", [], {}):
            out[key] = MASK
        elif type(v) is str:  # a leaf inline: what _redact does with it, without the call
            out[key] = redact_text(v, max_str) if mask else _truncate(v, max_str)
        else:
            out[key] = _redact(v, depth + 1, max_str, max_items, max_depth, mask)
    return out


def bound(obj: Any, *, max_str: int = MAX_STR, max_items: int = MAX_ITEMS, max_depth: int = MAX_DEPTH) -> Any:
    """A JSON-safe copy of ``obj`` bounded like :func:`redact` but without masking (stored tool results)."""
    try:
        return _redact(obj, 0, max_str, max_items, max_depth, False)
    except Exception as exc:
        return f"[unboundable {type(obj).__name__}: {type(exc).__name__}]"


def _truncate(text: str, max_len: int) -> str:
    if len(text) > max_len:
        return text[:max_len] + f"…[+{len(text) - max_len} chars]"
    return text


def _as_plain(obj: Any) -> Any:
    """Pydantic models and dataclasses as dicts; everything else unchanged."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json")
        except Exception:
            return dump()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return obj


def canonical_json(obj: Any) -> str:
    """Deterministic JSON text: sorted keys, compact separators, non-JSON values via ``str``."""
    return json.dumps(_as_json(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _as_json(obj: Any) -> Any:
    obj = _as_plain(obj)
    if isinstance(obj, Mapping):
        return {str(k): _as_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_as_json(v) for v in obj]
    if isinstance(obj, set | frozenset):
        return sorted((_as_json(v) for v in obj), key=repr)
    if isinstance(obj, bytes | bytearray):
        return base64.b64encode(bytes(obj)).decode()
    if isinstance(obj, enum.Enum):
        return obj.value
    return obj


def fingerprint(obj: Any) -> str:
    """sha256 hex digest of the canonical JSON of ``obj``."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def _refuse(obj: Any) -> Any:
    raise TypeError(f"{type(obj).__name__} is not a JSON type")


def _canonical_encoder(*, default: Callable[[Any], Any], allow_nan: bool) -> Callable[[Any], str]:
    """json's encoder with the canonical settings (sorted keys, compact separators, ``ensure_ascii=False``),
    made once: ``json.dumps`` makes a ``JSONEncoder`` and a C encoder for every call (issue 34: ≈ 2 µs of a
    small value's text). The same text; a value that refers to itself raises ``RecursionError`` (there is no
    ``check_circular`` memo; a JSON-plain value cannot)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the _json accelerator
        return json.JSONEncoder(
            sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=default, allow_nan=allow_nan
        ).encode
    chunks = make(None, default, json.encoder.encode_basestring, None, ":", ",", True, False, allow_nan)

    def encode(obj: Any) -> str:
        if type(obj) is str:  # what JSONEncoder.encode does for a bare string
            return json.encoder.encode_basestring(obj)
        return "".join(chunks(obj, 0))

    return encode


_plain_encode = _canonical_encoder(default=str, allow_nan=True)
_strict_encode = _canonical_encoder(default=_refuse, allow_nan=False)


def canonical_strict_json(obj: Any) -> str:
    """:func:`canonical_plain_json`'s text of a value made of JSON types only; raises ``TypeError`` for any
    other type (bytes, a model, a key neither str, int, float, bool nor None) and ``ValueError`` for NaN or an
    infinity (where :func:`canonical_plain_json` writes ``str(value)`` or ``NaN``)."""
    return _strict_encode(obj)


def canonical_plain_json(obj: Any) -> str:
    """:func:`canonical_json` of a value that is already JSON-plain (string keys; str, int, float, bool,
    None, list and dict values: what :func:`redact`, :func:`bound` and ``model_dump(mode="json")`` return):
    the same text, without the Python walk that converts other types first."""
    return _plain_encode(obj)


def plain_fingerprint(obj: Any) -> str:
    """:func:`fingerprint` of a JSON-plain value (see :func:`canonical_plain_json`): the same digest."""
    return hashlib.sha256(canonical_plain_json(obj).encode("utf-8")).hexdigest()
