"""The tree's config snapshot, validated once in the zygote before it forks, reused by the children it forks.

Every child starts by validating the tree's config (``ConfigSource(home, TreeSettings.from_raw, tree=True)``:
~40 section models). Run in the child, that validation copies ~1.3 MiB of the zygote's pages (reference counts
and first-use state of the schema's validators) into each child, at every start and restart (a fork measured:
+2.1 MiB for the ``ConfigSource`` with it, +0.9 without). The zygote now validates the tree's validated copy
(``run/config.good.toml``) before a fork when its bytes changed (:func:`prepare`), and a child's build
(:func:`build`) returns that snapshot when the file it parsed is the same document: the same keys and values
of the same types (``1``, ``1.0`` and ``true`` differ), so the result is the one ``TreeSettings.from_raw``
would give (it is a pure function of the parsed file). Anything else is validated as before, in the child.
"""

from __future__ import annotations

from typing import Any

from actors.tree.config_sections import TreeSettings
from geode.config_file import last_good_path, parse_config
from geode.home import GeodeHome

# (the file's bytes, the document parsed from them, its snapshot): the zygote's, inherited by its forks
_memo: tuple[bytes, dict[str, Any], TreeSettings] | None = None
reused = 0  # builds answered by the memo in this process (a count for tests)


def prepare(home: GeodeHome) -> bool:
    """In the zygote, before a fork: validate the tree's copy if its bytes changed. True when it was
    validated now (new objects: the zygote freezes them); the snapshot kept or none to reuse (no copy yet,
    unreadable or invalid: the child reads and reports it itself, as before) is False."""
    global _memo
    try:
        raw = last_good_path(home).read_bytes()
        if _memo is not None and _memo[0] == raw:
            return False
        doc = parse_config(raw, last_good_path(home))
        _memo = (raw, doc, TreeSettings.from_raw(parse_config(raw, last_good_path(home))))
    except Exception:  # the child validates it and says why
        _memo = None
        return False
    return True


def snapshot() -> TreeSettings | None:
    """The zygote's validated snapshot (None: none yet, or the copy was unreadable or invalid)."""
    return _memo[2] if _memo is not None else None


def build(doc: dict[str, Any]) -> TreeSettings:
    """``TreeSettings.from_raw(doc)``, or the zygote's snapshot of the same document."""
    global reused
    if _memo is not None and _same(doc, _memo[1]):
        reused += 1
        return _memo[2]
    return TreeSettings.from_raw(doc)


def _same(a: Any, b: Any) -> bool:
    """Equal documents, types included (TOML: tables, arrays, strings, numbers, booleans, dates)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
