"""Text that is not valid Unicode: lone surrogates (a model's ``"\\ud800"``, a file name's undecodable bytes
as Python's surrogateescape gives them) found and shown as escapes, so UTF-8 encoders never raise on them."""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_one(m: re.Match[str]) -> str:
    code = ord(m.group())
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape: the original byte (a file name, argv)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def escape_text(text: str) -> str:
    """``text`` with each lone surrogate written as an escape: an undecodable byte as ``\\xff``, any other
    as ``\\ud800`` (valid UTF-8 from then on; the escape shows where the bad character was)."""
    return _SURROGATE.sub(_escape_one, text) if _SURROGATE.search(text) else text


def escape_tree(value: Any) -> Any:
    """``value`` (JSON-shaped: dicts, lists, tuples, strings) with :func:`escape_text` on every string,
    keys included; anything else as it is."""
    if isinstance(value, str):
        return escape_text(value)
    if isinstance(value, dict):
        return {escape_tree(k): escape_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(escape_tree(v) for v in value)
    return value


def first_lone_surrogate(value: Any, where: str = "") -> str | None:
    """The key path (``path``, ``edits[0].old``) of the first string in ``value`` with a lone surrogate,
    ``"<key>"`` for a key, or None when every string is valid Unicode."""
    if isinstance(value, str):
        return (where or "value") if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            key = str(k)
            if isinstance(k, str) and _SURROGATE.search(k):
                return f"{where}.<key>" if where else "<key>"
            found = first_lone_surrogate(v, f"{where}.{key}" if where else key)
            if found:
                return escape_text(found)
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found = first_lone_surrogate(v, f"{where}[{i}]")
            if found:
                return found
    return None


def undecodable(text: str) -> str | None:
    """Where ``text`` (from argv or a terminal, decoded with surrogateescape) is not valid Unicode, as
    ``byte 3: 0xff``, or None when it is."""
    if not _SURROGATE.search(text):
        return None
    raw = text.encode("utf-8", "surrogateescape") if _only_escaped(text) else None
    if raw is None:
        at = _SURROGATE.search(text)
        assert at is not None
        return f"character {at.start()}: a lone surrogate \\u{ord(at.group()):04x}"
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"byte {exc.start}: 0x{raw[exc.start : exc.end].hex(' ')}"
    return None


def _only_escaped(text: str) -> bool:
    return all(0xDC80 <= ord(c) <= 0xDCFF for c in _SURROGATE.findall(text))
