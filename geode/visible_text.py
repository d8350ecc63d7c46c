"""Text GEODE did not write (model text, tool arguments and output, chat and session records) made safe to
print: every control character becomes a visible escape, so nothing a model says can steer a terminal."""

from __future__ import annotations

# C0 except newline and tab, DEL, C1: a terminal acts on them (ESC starts colour, hide, clipboard (OSC 52),
# title and clear-screen sequences; CR overwrites a line; BS erases what came before).
_CONTROLS = [*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0)]
# bidirectional overrides and isolates: they reorder what is shown without changing what runs
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]
_TABLE: dict[int, str] = {c: f"\\x{c:02x}" for c in _CONTROLS}
_TABLE[0x1B] = "^["  # ESC: the start of every terminal sequence, shown as the caret form
_TABLE.update({c: f"\\u{c:04x}" for c in _BIDI})
_TABLE.update({c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)})  # lone surrogates cannot be printed
_KEEP_LINES = dict(_TABLE)
_ONE_LINE = {**_TABLE, 0x0A: "\\n", 0x09: "\\t"}


def visible(text: str, *, one_line: bool = False) -> str:
    """``text`` with every control character escaped (``\\x1b`` → ``^[``, other C0/C1 and DEL → ``\\xNN``,
    bidi controls and lone surrogates → ``\\uNNNN``); newline and tab are kept unless ``one_line``."""
    return str(text).translate(_ONE_LINE if one_line else _KEEP_LINES)


_JSON = {c: f"\\u{c:04x}" for c in (0x7F, *range(0x80, 0xA0), *_BIDI)}


def visible_json(dumped: str) -> str:
    """JSON text (``json.dumps`` already escapes C0) with DEL, C1 and bidi controls as ``\\uNNNN`` escapes:
    still the same JSON value, now safe on a terminal."""
    return dumped.translate(_JSON)
