"""Files GEODE executes or loads into the prompt (MCP configs, hook settings, GEODE.md, rules, memory, skill
and heartbeat files): a built-in write to one is its own approval class, asked each time, never "always"."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geode.tools.spec import ApprovalMode, EffectClass, ToolSpec

if TYPE_CHECKING:
    from geode.config_schema import GeodeConfig

# loaded into the system prompt (geode/prompt/sources.py) or, for the last three, by the features coming next
INSTRUCTION_NAMES = frozenset({"geode.md", "memory.md", "skill.md", "heartbeat.md"})
EXECUTED_NAMES = frozenset({".mcp.json"})  # its servers' commands start with the executor
CLAUDE_SETTINGS = frozenset({"settings.json", "settings.local.json"})  # hooks, under a .claude directory
EXECUTES = "writes a file GEODE executes"
INSTRUCTIONS = "writes a file GEODE loads as instructions"
CONFIG = "writes into a .geode directory (GEODE's project configuration)"


def kind_of(path: Path, claude_settings: Iterable[Path] = ()) -> str | None:
    """The class of a write to ``path`` (absolute), or ``None`` for an ordinary file."""
    name = path.name.lower()
    parts = [p.lower() for p in path.parts[:-1]]
    if name in EXECUTED_NAMES or path in set(claude_settings):
        return EXECUTES
    if parts and parts[-1] == ".claude" and name in CLAUDE_SETTINGS:
        return EXECUTES
    if ".geode" in parts:
        last = len(parts) - 1 - parts[::-1].index(".geode")
        after = parts[last + 1 :]  # below the innermost .geode directory
        if not after and name == "config.toml":
            return EXECUTES  # a project's MCP servers
        if name in INSTRUCTION_NAMES or (after[:1] == ["rules"]):
            return INSTRUCTIONS
        return CONFIG
    if name in INSTRUCTION_NAMES:
        return INSTRUCTIONS
    return None


def write_class(
    spec: ToolSpec,
    args: Mapping[str, Any],
    path_args: tuple[str, ...],
    workspace: Path,
    config: GeodeConfig,
) -> str:
    """``"<class>: <path>"`` when a built-in tool that changes files targets such a file (as named, or where a
    symlink on the way leads), else ``""``. Runs after the roots check, so every path is a valid one."""
    if not spec.handler.startswith("builtin:") or spec.policy.effect is EffectClass.READ:
        return ""
    settings = _claude_settings(config.hooks.claude_settings)
    for key in path_args:
        raw = args.get(key)
        if not isinstance(raw, str) or not raw:
            continue
        named = Path(os.path.abspath(workspace / Path(raw).expanduser()))
        for candidate in dict.fromkeys((named, Path(os.path.realpath(named)))):
            kind = kind_of(candidate, settings)
            if kind:
                return f"{kind}: {candidate}"
    return ""


def own_class(spec: ToolSpec) -> ToolSpec:
    """The spec the approval gate sees for such a write: asked every time ("always" is not remembered)."""
    policy = spec.policy.model_copy(update={"approval": ApprovalMode.PER_INVOCATION})
    return spec.model_copy(update={"policy": policy})


def _claude_settings(raw: list[str] | str) -> list[Path]:
    entries = [raw] if isinstance(raw, str) else raw
    out: list[Path] = []
    for entry in entries:
        if isinstance(entry, str) and entry:
            path = Path(entry).expanduser()
            out += [Path(os.path.abspath(path)), Path(os.path.realpath(path))]
    return out
