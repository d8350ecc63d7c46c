"""Hook entries: from TOML (``[[hooks.PreToolUse]] matcher, command, timeout, fail, dialect``) or code."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from geode.hooks.events import DECIDING_EVENTS, HookEvent
from geode.hooks.settings import CLAUDE_DEFAULT_TIMEOUT_S, DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S
from geode.protocol.errors import ConfigError

if TYPE_CHECKING:
    from geode.config_schema import GeodeConfig

_FIELDS = {"matcher", "command", "timeout", "fail", "dialect", "name"}

HookCallable = Callable[[str, dict[str, Any], dict[str, Any]], Any]


@dataclass(frozen=True)
class HookEntry:
    """One configured hook: exactly one of ``command`` (a shell string) and ``fn`` (a callable)."""

    event: HookEvent
    name: str
    matcher: str = ""
    command: str | None = None
    fn: HookCallable | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    fail: Literal["closed", "open"] = "closed"
    dialect: Literal["geode", "claude-code"] = "geode"
    _pattern: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    @property
    def deciding(self) -> bool:
        return self.event in DECIDING_EVENTS

    def matches(self, tool_name: str | None) -> bool:
        """Claude Code semantics: empty or ``*`` matches everything; otherwise a full-match regex."""
        if not self.matcher or self.matcher == "*" or tool_name is None:
            return True
        pattern = self._pattern or re.compile(self.matcher)
        return pattern.fullmatch(tool_name) is not None


def entry(
    event: str | HookEvent,
    *,
    name: str,
    matcher: str = "",
    command: str | None = None,
    fn: HookCallable | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    fail: str = "closed",
    dialect: str = "geode",
) -> HookEntry:
    """Build and validate one entry (shared by TOML loading and code registration)."""
    try:
        ev = HookEvent(event)
    except ValueError:
        raise ConfigError(
            f"unknown hook event {event!r}; known: {', '.join(e.value for e in HookEvent)}"
        ) from None
    if (command is None) == (fn is None):
        raise ConfigError(f"hook {name!r}: set exactly one of command or a callable")
    if fail not in ("closed", "open"):
        raise ConfigError(f"hook {name!r}: fail must be 'closed' or 'open', not {fail!r}")
    if dialect not in ("geode", "claude-code"):
        raise ConfigError(f"hook {name!r}: dialect must be 'geode' or 'claude-code', not {dialect!r}")
    if not (0 < float(timeout_s) <= MAX_TIMEOUT_S):
        raise ConfigError(f"hook {name!r}: timeout must be in (0, {MAX_TIMEOUT_S:.0f}] seconds")
    try:
        pattern = re.compile(matcher) if matcher and matcher != "*" else None
    except re.error as exc:
        raise ConfigError(f"hook {name!r}: invalid matcher regex {matcher!r}: {exc}") from None
    return HookEntry(ev, name, matcher, command, fn, float(timeout_s), fail, dialect, pattern)  # type: ignore[arg-type]


def hooks_of(config: GeodeConfig, *, base_dir: Path | None = None) -> list[HookEntry]:
    """The snapshot's ``[hooks]`` entries (checked at start and by reload; see :func:`load_hooks`)."""
    return load_hooks({"hooks": config.hooks.model_dump(exclude_defaults=True)}, base_dir=base_dir)


def load_hooks(data: Mapping[str, Any], *, base_dir: Path | None = None) -> list[HookEntry]:
    """Entries from a parsed config file's ``hooks`` table (``[[hooks.<Event>]]`` arrays); unknown fields
    are errors.

    ``hooks.claude_settings = ["~/.claude/settings.json", ...]`` also imports Claude Code settings files
    (their ``hooks`` object, dialect claude-code); relative paths resolve against ``base_dir``.
    """
    table = data.get("hooks") or {}
    if not isinstance(table, Mapping):
        raise ConfigError("[hooks] must be a table of event arrays")
    out: list[HookEntry] = []
    for event, items in table.items():
        if event == "claude_settings":
            for path in items if isinstance(items, list) else [items]:
                out.extend(load_claude_settings_file(Path(str(path)).expanduser(), base_dir=base_dir))
            continue
        if not isinstance(items, list):
            raise ConfigError(f"hooks.{event} must be an array of tables ([[hooks.{event}]])")
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise ConfigError(f"hooks.{event}[{i}] must be a table")
            unknown = set(item) - _FIELDS
            if unknown:
                raise ConfigError(f"hooks.{event}[{i}]: unknown field(s) {sorted(unknown)}")
            if "command" not in item:
                raise ConfigError(f"hooks.{event}[{i}]: command is required")
            out.append(
                entry(
                    event,
                    name=str(item.get("name") or f"{event}[{i}]"),
                    matcher=str(item.get("matcher", "")),
                    command=str(item["command"]),
                    timeout_s=float(item.get("timeout", DEFAULT_TIMEOUT_S)),
                    fail=str(item.get("fail", "closed")),
                    dialect=str(item.get("dialect", "geode")),
                )
            )
    return out


def load_claude_settings(data: Mapping[str, Any], *, source: str = "settings") -> list[HookEntry]:
    """Claude Code's shape: ``{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
    "command": "...", "timeout": 60}]}]}}``. Events GEODE does not know are skipped; timeouts are seconds."""
    hooks = data.get("hooks") or {}
    if not isinstance(hooks, Mapping):
        raise ConfigError(f"{source}: hooks must be an object")
    known = {e.value for e in HookEvent}
    out: list[HookEntry] = []
    for event, groups in hooks.items():
        if event not in known or not isinstance(groups, list):
            continue
        for gi, group in enumerate(groups):
            if not isinstance(group, Mapping):
                raise ConfigError(f"{source}: hooks.{event}[{gi}] must be an object")
            for hi, h in enumerate(group.get("hooks") or []):
                if not isinstance(h, Mapping) or h.get("type", "command") != "command" or "command" not in h:
                    continue
                timeout = min(float(h.get("timeout", CLAUDE_DEFAULT_TIMEOUT_S)), MAX_TIMEOUT_S)
                out.append(
                    entry(
                        event,
                        name=f"{source}:{event}[{gi}][{hi}]",
                        matcher=str(group.get("matcher", "")),
                        command=str(h["command"]),
                        timeout_s=timeout,
                        dialect="claude-code",
                    )
                )
    return out


def load_claude_settings_file(path: Path, *, base_dir: Path | None = None) -> list[HookEntry]:
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read Claude Code settings: {exc}") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: settings must be a JSON object")
    return load_claude_settings(data, source=str(path))
