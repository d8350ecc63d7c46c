"""One-line summaries of tool results for the ``⎿`` line: lines read, bytes written, exit code, why."""

from __future__ import annotations

from typing import Any

from geode.tools.spec import ToolResult
from geode.tools.structured_text import expand

MAX_CHARS = 120


def _one_line(text: Any, limit: int = MAX_CHARS) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _last_line(text: Any) -> str:
    lines = [ln for ln in str(text or "").splitlines() if ln.strip()]
    return _one_line(lines[-1], 80) if lines else ""


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def result_summary(result: ToolResult) -> str:
    """A short description of what a call did (or why it did not); empty when nothing useful to say."""
    c = expand(result.content)  # an MCP structured result's carried text: the object it holds
    if result.is_error:
        if isinstance(c, dict):
            why = str(c.get("reason") or c.get("error") or result.error_type or "")
            return _one_line(why.split(" Do NOT retry", 1)[0])  # the person reads why, not the model's rule
        return _one_line(c or result.error_type or "")
    if not isinstance(c, dict):
        return _one_line(c) if isinstance(c, str) else ""
    if "exit_code" in c:
        last = _last_line(c.get("stdout")) or _last_line(c.get("stderr"))
        return f"exit {c['exit_code']}" + (f" · {last}" if last else "")
    if "lines" in c and "file_path" in c:
        total = c.get("total_lines")
        of = f" of {total}" if isinstance(total, int) and total != c["lines"] else ""
        return f"read {_plural(int(c['lines']), 'line')}{of}"
    if "bytes" in c and "file_path" in c:
        return f"{'created' if c.get('created') else 'wrote'} {_plural(int(c['bytes']), 'byte')}"
    if "replacements" in c:
        return _plural(int(c["replacements"]), "replacement")
    if isinstance(c.get("entries"), list):
        return _plural(len(c["entries"]), "entry").replace("entrys", "entries")
    if isinstance(c.get("matches"), list):
        return f"{_plural(len(c['matches']), 'match').replace('matchs', 'matches')}"
    if isinstance(c.get("files"), list):
        return _plural(len(c["files"]), "file")
    if "status" in c and "url" in c:
        return f"HTTP {c['status']}"
    if c.get("sent") is True:
        return "sent"
    return ""
