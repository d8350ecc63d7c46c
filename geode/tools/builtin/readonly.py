"""Read-only shell pipelines that may run without a prompt: a safe first command, then only filters.

Deliberately narrower than the reference list: nothing that can execute code (python -c, awk, sed, env CMD,
find -exec; git, whose repository config can run programs: core.fsmonitor, diff.external) or write files
(sort -o, tee, uniq IN OUT, redirections) qualifies.
"""

from __future__ import annotations

import shlex

_FORBIDDEN = (">", "<", ";", "&", "`", "$(", "$", "\n", "\\", "||")
_FIRST = {
    "cat",
    "head",
    "tail",
    "ls",
    "pwd",
    "echo",
    "wc",
    "grep",
    "rg",
    "find",
    "which",
    "whoami",
    "date",
    "uname",
    "df",
    "du",
    "stat",
}
_FILTERS = {"head", "tail", "wc", "sort", "cut", "tr", "grep", "rg", "cat", "jq", "column", "fold", "nl"}
_FIND_BAD = {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}


def _stage_ok(words: list[str], allowed: set[str]) -> bool:
    if not words or words[0] not in allowed:
        return False
    cmd, args = words[0], words[1:]
    if cmd == "find" and any(a in _FIND_BAD for a in args):
        return False
    if cmd == "sort" and any(a == "-o" or a.startswith(("--output", "-o")) for a in args):
        return False
    if cmd in ("grep", "rg") and any(a.startswith("--pre") for a in args):  # rg --pre runs a program
        return False
    return True


def is_read_only(command: str) -> bool:
    """True only for commands provably limited to reading: ``first | filter | filter ...``."""
    if not command.strip() or any(tok in command for tok in _FORBIDDEN):
        return False
    stages = command.split("|")
    try:
        parsed = [shlex.split(s) for s in stages]
    except ValueError:
        return False
    return _stage_ok(parsed[0], _FIRST) and all(_stage_ok(w, _FILTERS) for w in parsed[1:])
