"""MCP server entries from GEODE's TOML (``[mcp.servers.<name>]``) or the common ``mcpServers`` JSON shape.

A server is stdio (``command``, ``args``, ``env``, ``cwd``) or streamable HTTP (``url``, ``headers``).
Tools run only with a declared policy: ``tools.<tool>``, ``read_only_tools`` or ``resource_keys`` (DESIGN §1).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from geode.protocol.errors import ConfigError
from geode.tools.mcp.settings import McpServerTable, json_shape_error

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")  # ${VAR} or ${VAR:-default}
GLOBAL_ORIGIN = "global"


class McpServerConfig(McpServerTable):
    """One configured MCP server; ``origin`` is ``"global"`` or the trusted project directory it came from."""

    name: str
    origin: str = GLOBAL_ORIGIN


def _entry(name: str, raw: Mapping[str, Any], where: str, origin: str = GLOBAL_ORIGIN) -> McpServerConfig:
    """One entry of either shape (``type`` and ``disabled`` mapped); an error names the entry."""
    if not _NAME.match(name):
        raise ConfigError(f"{where}: server name {name!r} must match [A-Za-z0-9_-]{{1,32}}")
    data = {k: v for k, v in raw.items() if k not in ("type", "disabled")}
    if (problem := json_shape_error(dict(raw))) is not None:
        raise ConfigError(f"{where}.{name}: {problem}")
    disabled = raw.get("disabled", False)
    if not isinstance(disabled, bool):
        raise ConfigError(f"{where}.{name}: disabled must be true or false (got {disabled!r})")
    if disabled:
        data["enabled"] = False
    try:
        cfg = McpServerConfig(name=name, origin=origin, **data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        msg = str(first.get("msg", "")).removeprefix("Value error, ")
        raise ConfigError(f"{where}.{name}: {loc + ': ' if loc else ''}{msg}") from None
    except TypeError as exc:  # e.g. a key that is not a string
        raise ConfigError(f"{where}.{name}: {exc}") from None
    for tool, pol in cfg.tools.items():
        if pol.effect.value != "read" and not pol.resource_strategy and not pol.denied:
            raise ConfigError(
                f"{where}.{name}.tools.{tool}: effect {pol.effect.value} needs a resource_strategy"
            )
    return cfg


def _tables(data: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """``(where, {name: entry})`` for ``[mcp.servers]`` then ``mcpServers`` (the first wins a name clash)."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    mcp = data.get("mcp")
    if mcp is not None and not isinstance(mcp, Mapping):
        raise ConfigError("mcp must be a table ([mcp.servers.<name>])")
    servers = (mcp or {}).get("servers")
    for where, table in (("mcp.servers", servers), ("mcpServers", data.get("mcpServers"))):
        if table is None:
            continue
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where} must be a table of servers by name, not {type(table).__name__}")
        out.append((where, table))
    return out


def iter_mcp_entries(
    data: Mapping[str, Any], *, origin: str = GLOBAL_ORIGIN
) -> list[tuple[str, McpServerConfig | ConfigError]]:
    """Every entry of ``data`` (a parsed config file) in order as ``(name, server or its error)``: a caller
    may skip bad ones."""
    out: list[tuple[str, McpServerConfig | ConfigError]] = []
    for where, table in _tables(data):
        for name, raw in table.items():
            if not isinstance(raw, Mapping):
                bad = ConfigError(f"{where}.{name}: must be a table, not {type(raw).__name__}")
                out.append((str(name), bad))
                continue
            try:
                out.append((str(name), _entry(str(name), raw, where, origin)))
            except ConfigError as exc:
                out.append((str(name), exc))
    return out


def parse_mcp_servers(data: Mapping[str, Any], *, origin: str = GLOBAL_ORIGIN) -> list[McpServerConfig]:
    """All servers of ``data``, a parsed config file (disabled and HTTP ones included); the first bad entry
    is a ``ConfigError``.

    ``[mcp.servers.<name>]`` wins over a ``mcpServers`` entry of the same name.
    """
    out: dict[str, McpServerConfig] = {}
    for name, item in iter_mcp_entries(data, origin=origin):
        if isinstance(item, ConfigError):
            raise item
        out.setdefault(name, item)
    return list(out.values())


def expand_vars(server: McpServerConfig, environ: Mapping[str, str]) -> McpServerConfig:
    """``${VAR}`` / ``${VAR:-default}`` in command, args, env, cwd, url and headers (as ``.mcp.json`` files
    written for Claude Code use them); an unset variable without a default is a ``ConfigError``."""
    missing: list[str] = []

    def sub(text: str) -> str:
        def one(m: re.Match[str]) -> str:
            value = environ.get(m.group(1))
            if value is None and m.group(2) is None:
                missing.append(m.group(1))
            return value if value is not None else (m.group(2) or "")

        return _VAR.sub(one, text)

    data = server.model_dump()
    data["command"] = sub(server.command) if server.command is not None else None
    data["url"] = sub(server.url) if server.url is not None else None
    data["cwd"] = sub(server.cwd) if server.cwd is not None else None
    data["args"] = [sub(a) for a in server.args]
    data["env"] = {k: sub(v) for k, v in server.env.items()}
    data["headers"] = {k: sub(v) for k, v in server.headers.items()}
    if missing:
        names = ", ".join(f"${{{v}}}" for v in dict.fromkeys(missing))
        raise ConfigError(f"server {server.name!r}: {names} not set (environment or $GEODE_HOME/.env)")
    if data == server.model_dump():
        return server
    try:
        return McpServerConfig.model_validate(data)
    except ValidationError as exc:
        msg = str(exc.errors()[0].get("msg", "")).removeprefix("Value error, ")
        raise ConfigError(f"server {server.name!r} after ${{VAR}} expansion: {msg}") from None


def load_mcp_servers(data: Mapping[str, Any]) -> list[McpServerConfig]:
    """The global config's enabled stdio servers (the pre-catalogue behaviour; validates every entry).

    The runtime should use :func:`geode.tools.mcp.catalogue.load_mcp_catalogue` (HTTP, trusted projects).
    """
    return [s for s in parse_mcp_servers(data) if s.enabled and s.transport == "stdio"]
