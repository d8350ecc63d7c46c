"""Issue 34, session 7 (EXEC3): glob_files compiles its pattern's segments once per call; which paths match
is what ``fnmatch.fnmatchcase`` per segment (``**``: any number of folders) said before."""

from __future__ import annotations

import fnmatch
import random

from geode.tools.builtin.search import _matcher


def _reference(segs: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    if "**" not in segs:
        return len(segs) == len(parts) and all(map(fnmatch.fnmatchcase, parts, segs))
    at = {0}
    for seg in segs:
        if seg == "**":
            at = set(range(min(at), len(parts) + 1))
        else:
            at = {j + 1 for j in at if j < len(parts) and fnmatch.fnmatchcase(parts[j], seg)}
        if not at:
            return False
    return len(parts) in at


def test_the_compiled_pattern_matches_as_fnmatchcase_does() -> None:
    rnd = random.Random(34)
    segments = ["a", "b", "*", "?", "[ab]", "[!a]", "**", "x*y", "*.py", "[", "]", "A"]
    segments += ["x.py", "a\\b", ".hid"]  # no pattern: compared
    names = ["a", "b", "ab", "x.py", "xy", "a\nb", ".hid", "[", "]", "x*y", "A", "B.PY"]
    names += ["a\\b", "xapy", "a\n"]
    for _ in range(5000):
        segs = tuple(rnd.choice(segments) for _ in range(rnd.randint(1, 4)))
        parts = tuple(rnd.choice(names) for _ in range(rnd.randint(0, 4)))
        assert _matcher(segs)(parts) == _reference(segs, parts), (segs, parts)


def test_a_segment_that_is_no_pattern_matches_only_its_own_name() -> None:
    """(EXEC4) a segment without ``*``, ``?`` or ``[`` is compared, not matched by a regular expression: the
    same answer as fnmatchcase, dots, backslashes, regex signs and case included."""
    for seg in ("data-3.txt", "a.b", "a\\b", "(x)+", "^$", "a|b", "{1}", "]", "x.PY"):
        matcher = _matcher((seg,))
        for name in (seg, seg.upper(), seg + "\n", "x" + seg, seg[:-1], "a", "aab", "data-3xtxt"):
            assert matcher((name,)) == fnmatch.fnmatchcase(name, seg), (seg, name)
        assert not matcher((seg, seg)) and not matcher(())
        assert _matcher(("dir", seg))(("dir", seg)) and not _matcher(("dir", seg))(("Dir", seg))
