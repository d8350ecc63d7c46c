"""Claude Code dialect: GEODE tool names and arguments ↔ Claude Code's (Read, Write, Edit, Bash, ...)."""

from __future__ import annotations

import math
from typing import Any

TO_CLAUDE = {
    "read_file": "Read",
    "write_file": "Write",
    "edit_file": "Edit",
    "run_bash": "Bash",
    "glob_files": "Glob",
    "grep_files": "Grep",
    "web_fetch": "WebFetch",
}
FROM_CLAUDE = {v: k for k, v in TO_CLAUDE.items()}
# Arguments each GEODE tool accepts (Claude Code extras like Grep's output_mode are dropped coming back).
_KNOWN_ARGS = {
    "read_file": {"file_path", "offset", "limit"},
    "write_file": {"file_path", "content"},
    "edit_file": {"file_path", "old_string", "new_string", "replace_all"},
    "run_bash": {"command", "timeout"},
    "glob_files": {"pattern", "path"},
    "grep_files": {"pattern", "path", "glob"},
    "web_fetch": {"url"},
}


def tool_name_out(name: str) -> str:
    return TO_CLAUDE.get(name, name)


def tool_name_in(name: str) -> str:
    return FROM_CLAUDE.get(name, name)


def tool_input_out(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """GEODE arguments as Claude Code expects them (Bash ``timeout`` is milliseconds there)."""
    out = dict(args)
    if name == "run_bash" and isinstance(out.get("timeout"), int | float):
        out["timeout"] = int(out["timeout"] * 1000)
    return out


def tool_input_in(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A Claude Code ``updatedInput`` mapped back to GEODE's argument names and units."""
    out = dict(args)
    timeout = out.get("timeout")
    # only a finite number converts (round(inf) raises); anything else is left for the tool to refuse
    if name == "run_bash" and isinstance(timeout, int | float) and math.isfinite(timeout):
        out["timeout"] = max(1, round(timeout / 1000))
    known = _KNOWN_ARGS.get(name)
    if known is not None:
        out = {k: v for k, v in out.items() if k in known}
    return out
