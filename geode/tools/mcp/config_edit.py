"""Adding and removing MCP servers in the global ``config.toml`` (``geode mcp-servers add`` / ``remove``).

Edited textually through ``geode.config_file``, as ``[trust] projects`` is (``trust.py``): a server is
appended as its own ``[mcp.servers.<name>]`` table and removed by deleting its tables, so the rest of the
file, comments included, is kept byte for byte; every edit is re-parsed and must mean exactly the intended
change.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from geode.config_file import edit_lock, read_for_edit, write_checked
from geode.protocol.errors import ConfigError
from geode.tools.mcp.config import iter_mcp_entries

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_ANY_HEADER = re.compile(r"^[ \t]*\[")
_TABLES = ("mcp.servers", "mcpServers")


def stdio_entry(
    command: list[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    read_only_tools: list[str] | None = None,
    resource_keys: list[str] | None = None,
) -> dict[str, Any]:
    """The table of a stdio server from a command line and its options (empty options left out)."""
    if not command or not command[0].strip():
        raise ConfigError("give the server's command after --, e.g. -- npx -y @scope/server")
    entry: dict[str, Any] = {"command": command[0], "args": list(command[1:])}
    optional = {"env": dict(env or {}), "cwd": cwd, "read_only_tools": read_only_tools or []}
    entry.update({k: v for k, v in {**optional, "resource_keys": resource_keys or []}.items() if v})
    return entry


def parse_env(pairs: list[str]) -> dict[str, str]:
    """``K=V`` strings as a mapping; anything else is a ``ConfigError`` naming it."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise ConfigError(f"--env {pair!r}: write it as NAME=VALUE (NAME: letters, digits, _)")
        out[key] = value
    return out


def parse_json_entry(text: str) -> dict[str, Any]:
    """One ``mcpServers`` entry given as JSON text (an object), e.g. ``{"command": "npx", "args": [...]}``."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"--json: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--json: must be one server's object, not {type(data).__name__}")
    if "mcpServers" in data:
        raise ConfigError("--json: give one server's entry, not the whole mcpServers object")
    return data


def _names(data: Mapping[str, Any]) -> list[str]:
    names: list[str] = []
    for table in _tables_of(data).values():
        names += [n for n in table if n not in names]
    return names


def add_server(config_file: Path, name: str, entry: Mapping[str, Any], *, force: bool = False) -> bool:
    """Write ``[mcp.servers.<name>]`` = ``entry`` (checked as the executor will read it); True when an
    existing server of that name was replaced (only with ``force``)."""
    [(_name, checked)] = iter_mcp_entries({"mcp": {"servers": {name: dict(entry)}}})
    if isinstance(checked, ConfigError):
        raise checked
    rendered = _render_table(name, entry)
    with edit_lock(config_file):
        text, before = read_for_edit(config_file, "changing MCP servers")
        exists = name in _names(before)
        if exists and not force:
            raise ConfigError(
                f"an MCP server named {name!r} is already in {config_file}; "
                f"use --force to replace it, or `geode mcp-servers remove {name}`"
            )
        if exists:
            text = _without_tables(text, name)
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        new_text = f"{text}{sep}{rendered}"
        expected = _without_entry(before, name)
        expected.setdefault("mcp", {}).setdefault("servers", {})[name] = dict(entry)
        _check_and_write(config_file, new_text, expected, f"add it by hand:\n{rendered}")
    return exists


def remove_server(config_file: Path, name: str) -> None:
    """Delete the server's tables (``[mcp.servers.<name>]``, ``[mcpServers.<name>]`` and their sub-tables)."""
    with edit_lock(config_file):
        text, before = read_for_edit(config_file, "changing MCP servers")
        if name not in _names(before):
            known = ", ".join(_names(before)) or "none"
            raise ConfigError(f"no MCP server named {name!r} in {config_file} (configured: {known})")
        new_text = _without_tables(text, name)
        _check_and_write(
            config_file, new_text, _without_entry(before, name), f"remove the {name!r} entry by hand"
        )


# -- text ----------------------------------------------------------------------------------------------------


def _header_of(name: str) -> re.Pattern[str]:
    table = r"(?:mcp[ \t]*\.[ \t]*servers|mcpServers)"
    key = rf"(?:{re.escape(name)}|\"{re.escape(name)}\"|'{re.escape(name)}')"
    return re.compile(rf"^[ \t]*\[[ \t]*{table}[ \t]*\.[ \t]*{key}[ \t]*(?:\.[^\]]*)?\][ \t]*(?:#.*)?$")


def _without_tables(text: str, name: str) -> str:
    """``text`` minus every table headed ``[mcp.servers.<name>…]`` / ``[mcpServers.<name>…]``: its header
    and lines up to the next header, keeping the comments and blank lines just above that next header."""
    header = _header_of(name)
    lines = text.splitlines(keepends=True)
    keep = [True] * len(lines)
    i = 0
    while i < len(lines):
        if not header.match(lines[i].rstrip("\r\n")):
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not _ANY_HEADER.match(lines[end]):
            end += 1
        last = end
        while last > i + 1 and (not lines[last - 1].strip() or lines[last - 1].lstrip().startswith("#")):
            last -= 1  # comments and blank lines right above the next header belong to it
        for j in range(i, last):
            keep[j] = False
        i = end
    out = "".join(line for line, k in zip(lines, keep, strict=True) if k)
    return out.rstrip("\n") + "\n" if out.endswith("\n\n") else out  # no blank tail left by a removal


def _render_table(name: str, entry: Mapping[str, Any]) -> str:
    body = "".join(f"{_key(k)} = {_value(v, k)}\n" for k, v in entry.items())
    return f"[mcp.servers.{name}]\n{body}"


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _value(value: Any, where: str) -> str:
    if value is None:
        raise ConfigError(f"{where}: null is not allowed (TOML has no null); leave the key out")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(_value(v, where) for v in value) + "]"
    if isinstance(value, Mapping):
        items = ", ".join(f"{_key(str(k))} = {_value(v, f'{where}.{k}')}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    raise ConfigError(f"{where}: {type(value).__name__} values are not supported")


# -- checking ------------------------------------------------------------------------------------------------


def _tables_of(data: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    mcp = data.get("mcp")
    servers = mcp.get("servers") if isinstance(mcp, Mapping) else None
    found = {"mcp.servers": servers, "mcpServers": data.get("mcpServers")}
    return {k: v for k, v in found.items() if isinstance(v, Mapping)}


def _without_entry(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    out = copy.deepcopy(dict(data))
    mcp = out.get("mcp")
    if isinstance(mcp, dict) and isinstance(mcp.get("servers"), dict):
        mcp["servers"].pop(name, None)
    if isinstance(out.get("mcpServers"), dict):
        out["mcpServers"].pop(name, None)
    return out


def _check_and_write(config_file: Path, new_text: str, expected: dict[str, Any], by_hand: str) -> None:
    refusal = f"cannot edit the MCP servers automatically (they are written in an unusual form); {by_hand}"
    write_checked(config_file, new_text, expected, refusal)
