"""The MCP server catalogue: the global config's servers plus those of every trusted project directory."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from geode.home import GeodeHome
from geode.protocol.errors import ConfigError
from geode.tools.mcp.config import McpServerConfig, expand_vars, iter_mcp_entries, parse_mcp_servers
from geode.tools.mcp.trust import project_config_files, read_project_file, trusted_projects


class McpCatalogue(BaseModel):
    """Servers in precedence order (global first) and one note per ignored or invalid thing."""

    model_config = ConfigDict(frozen=True)
    servers: list[McpServerConfig] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def enabled(self) -> list[McpServerConfig]:
        return [s for s in self.servers if s.enabled]

    def get(self, name: str) -> McpServerConfig | None:
        return next((s for s in self.servers if s.name == name), None)


def _project_servers(project: Path, home_root: Path, notes: list[str]) -> list[McpServerConfig]:
    out: list[McpServerConfig] = []
    for path in project_config_files(project, home_root=home_root):
        try:
            entries = iter_mcp_entries(read_project_file(path), origin=str(project))
        except ConfigError as exc:
            notes.append(f"MCP: {exc.message}; its servers ignored")
            continue
        for name, item in entries:
            if isinstance(item, ConfigError):
                notes.append(f"MCP: {path}: {item.message}; server {name!r} ignored")
            elif any(s.name == name for s in out):
                notes.append(f"MCP: {path}: server {name!r} already defined in this project; ignored")
            else:
                out.append(_in_project(item, project))
    return out


def _in_project(server: McpServerConfig, project: Path) -> McpServerConfig:
    """A project's stdio server runs in the project directory (a relative ``cwd`` is relative to it)."""
    if server.transport != "stdio":
        return server
    cwd = project / server.cwd if server.cwd else project
    return server.model_copy(update={"cwd": str(cwd)})


def _expanded(
    servers: list[McpServerConfig], environ: Mapping[str, str], notes: list[str]
) -> list[McpServerConfig]:
    out: list[McpServerConfig] = []
    for server in servers:
        try:
            out.append(expand_vars(server, environ))
        except ConfigError as exc:
            where = "" if server.origin == "global" else f" (project {server.origin})"
            notes.append(f"MCP{where}: {exc.message}; server ignored")
    return out


def load_mcp_catalogue(global_config: Mapping[str, Any], *, home_root: Path) -> McpCatalogue:
    """The global config's servers, then each trusted project's ``.geode/config.toml`` and ``.mcp.json``.

    A bad global entry is a ``ConfigError`` (the start-up check refuses it too); a bad or clashing project
    entry is skipped with a note, and so is a server whose ``${VAR}`` is unset (the environment, then
    ``home_root/.env``). ``home_root`` is ``$GEODE_HOME``: its ``config.toml`` is never a project's.
    """
    declared = parse_mcp_servers(global_config)
    notes: list[str] = []
    environ = {**GeodeHome(home_root).load_dotenv(), **os.environ}  # the environment first, as for keys
    servers = _expanded(declared, environ, notes)
    owner = {s.name: s.origin for s in declared}  # a name stays taken even if its server was skipped
    projects, trust_notes = trusted_projects(global_config)
    notes.extend(trust_notes)
    for project in projects:
        if not os.path.isdir(project):  # os.path: an unreadable parent is "not a directory", no error
            notes.append(f"MCP: trusted project {project} is not a directory; skipped")
            continue
        found = _project_servers(project, home_root, notes)
        for server in found:
            taken = owner.get(server.name)
            if taken is None:
                owner[server.name] = server.origin
                continue
            winner = "the global server" if taken == "global" else f"the one from {taken}"
            notes.append(f"MCP: server {server.name!r} of project {project} ignored: {winner} has that name")
        mine = [s for s in found if owner[s.name] == str(project)]
        servers.extend(_expanded(mine, environ, notes))
    return McpCatalogue(servers=servers, notes=notes)


__all__ = ["McpCatalogue", "load_mcp_catalogue"]
