"""The quick screen in front of the secret shapes of :mod:`geode.redaction`: what tells, in a few substring
look-ups, that a text cannot hold any shape of a list, so that most texts run no regex at all (issue 34).

Each shape names the substrings every one of its matches contains (``needs``), or has a cheaper ``gate``
(:func:`run_gate`); :func:`min_width` is the length of the shortest text a pattern can match. The result of
redaction is the same with or without the screen (tests/records/test_redaction_screen.py)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol


class Shape(Protocol):
    """What the screen reads of a :class:`geode.redaction.Shape`."""

    @property
    def needs(self) -> tuple[str, ...]: ...
    @property
    def gate(self) -> Callable[[str], bool] | None: ...
    @property
    def min_len(self) -> int: ...
    @property
    def folds(self) -> bool: ...
    def possible(self, text: str) -> bool: ...


def run_gate(chars: str, length: int, end: str, *, ascii_only: bool) -> Callable[[str], bool]:
    """A gate: False when ``text`` holds no ``length`` characters of ``chars`` in a row followed by ``end``
    (with ``ascii_only``, a non-ASCII text always passes: the pattern's class is Unicode-wide there).

    ``chars`` and ``end`` are ASCII. A text up to ``LOOK_BEHIND_MAX`` characters (a timeline row, a log
    line) is one regex search that finds each ``end`` by its literal (sre's prefix scan) and only there looks
    back at the ``length`` characters before it: about half the cost of the byte table below on such texts
    (issue 34: the store's screen of a row), but a look-behind per ``end``, so a long text dense with them
    (minified code: a dot every few characters, 3-4x slower) takes the byte table: its UTF-8 bytes
    translated (``chars`` to 0, ``end`` kept, any other byte, a multi-byte character's included, to 1) and
    searched once, linear whatever it holds."""
    if not (chars + end).isascii() or end in chars:
        raise ValueError("a gate's characters and end are ASCII, its end not among its characters")
    cls = "".join(sorted({re.escape(c) for c in chars}))
    tail = re.escape(end)
    search = re.compile(f"{tail}(?<=[{cls}]{{{length}}}{tail})").search
    table = bytes(0 if chr(b) in chars else b if chr(b) == end else 1 for b in range(256))
    probe = b"\x00" * length + end.encode()

    def gate(text: str) -> bool:
        if text.isascii():
            if len(text) <= LOOK_BEHIND_MAX:
                return search(text) is not None
            return probe in text.encode("ascii").translate(table)
        if ascii_only:
            return True
        if len(text) <= LOOK_BEHIND_MAX:
            return search(text) is not None
        return probe in text.encode("utf-8", "surrogatepass").translate(table)

    return gate


LOOK_BEHIND_MAX = 4096  # a gate's regex search up to this length, its byte table beyond


def min_width(pattern: re.Pattern[str]) -> int:
    """The length of the shortest text ``pattern`` can match (0 when the parser cannot tell)."""
    try:
        from re import _parser  # type: ignore[attr-defined]

        low = int(_parser.parse(pattern.pattern, pattern.flags).getwidth()[0])
    except Exception:
        return 0
    return max(0, low)


class Screen:
    """A quick pass that tells a text no shape of a list can match (most texts): the shapes' ``needs`` looked
    up as substrings (a case-insensitive shape's in the lower-cased text, only when it is ASCII: Unicode
    case folding matches more than ``lower``), then the other shapes' gates."""

    def __init__(self, shapes: Sequence[Shape]) -> None:
        self.cased = _lean({n for s in shapes if not s.folds for n in s.needs})
        self.folded = _lean({n for s in shapes if s.folds for n in s.needs})
        # each need behind its rarest character: a one-character look-up (memchr) rules most needs out;
        # cased needs that share their first character are one regex search instead (sre scans for that
        # character in C and tries each need's rest only there: "xapp-" and "xox", "gh" and "github_pat_":
        # one pass of the text, not two needs each behind a common letter)
        singles, self._cased_groups = _first_char_groups(self.cased)
        self._cased = tuple((_rarest(n), n) for n in singles)
        self._folded = tuple((_rarest(n), n) for n in self.folded)
        self.gated = tuple(s for s in shapes if s.gate is not None)
        # (a gated shape's possible() is its length check and its gate: called here without possible())
        self._gates = tuple((s.min_len, s.gate) for s in self.gated if s.gate is not None)
        self.min_len = min(s.min_len for s in shapes)  # no shape matches a shorter text
        if any(not s.needs and s.gate is None for s in shapes):
            raise ValueError("every shape names what it needs or has a gate")

    def maybe(self, text: str) -> bool:
        if len(text) < self.min_len:
            return False
        for rare, need in self._cased:
            if rare in text and need in text:
                return True
        for search in self._cased_groups:
            if search(text) is not None:
                return True
        if self._folded:
            if not text.isascii():
                return True
            low = text.lower()
            for rare, need in self._folded:
                if rare in low and need in low:
                    return True
        for min_len, gate in self._gates:
            if len(text) >= min_len and gate(text):
                return True
        return False


def _lean(needs: set[str]) -> tuple[str, ...]:
    """The needs without those that hold a shorter one (a text with ``sk-ant-`` has ``sk-``): the same
    verdict with fewer look-ups."""
    return tuple(sorted(n for n in needs if not any(m != n and m in n for m in needs)))


def _first_char_groups(needs: Sequence[str]) -> tuple[list[str], tuple[Callable[[str], Any], ...]]:
    """The needs left to a look-up behind their rarest character, and one regex search per group of needs
    that share their first character (a match exactly when one of them is a substring of the text). Only
    needs whose rarest character is a common one (lower case or a sign: found in most texts, so the need
    itself is searched) are grouped; a need behind a rare capital stays a memchr that rules it out."""
    by_first: dict[str, list[str]] = {}
    singles = []
    for need in needs:
        if _BY_FREQUENCY.find(_rarest(need)) in range(_COMMON):
            by_first.setdefault(need[0], []).append(need)
        else:
            singles.append(need)
    singles += [group[0] for group in by_first.values() if len(group) == 1]
    groups = tuple(
        re.compile(re.escape(first) + "(?:" + "|".join(re.escape(n[1:]) for n in group) + ")").search
        for first, group in sorted(by_first.items())
        if len(group) > 1
    )
    return sorted(singles), groups


# letters and signs from the most to the least frequent in text and code (a rough order: it only chooses
# which character of a need is looked up first; any choice gives the same verdict)
_BY_FREQUENCY = " etaoinshrdlcu_./-mwfgypbvkjxqzETAOINSHRDLCUMWFGYPBVKJXQZ"
_COMMON = _BY_FREQUENCY.index("E")  # the lower-case letters and signs before the capitals


def _rarest(need: str) -> str:
    """The character of ``need`` least likely in a text (one not in the table counts as the rarest)."""
    return max(need, key=lambda c: _BY_FREQUENCY.find(c) % (len(_BY_FREQUENCY) + 1))
