"""The MCP server catalogue: the global config's servers plus those of every trusted project directory."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from geode.protocol.errors import ConfigError
from geode.tools.mcp.config import McpServerConfig, expand_vars, iter_mcp_entries, parse_mcp_servers
from geode.tools.mcp.trust import trusted_projects
from geode.tools.mcp.trust_check import TrustDropped, open_trusted, read_mcp_files
from geode.tools.mcp.trust_store import Binding, fingerprint, load_store

if TYPE_CHECKING:
    from geode.config_schema import GeodeConfig


class PendingServer(BaseModel):
    """A trusted project's server that `geode trust` did not approve (new, or what it runs changed)."""

    model_config = ConfigDict(frozen=True)
    server: McpServerConfig
    why: str  # "new" | "changed"


class McpCatalogue(BaseModel):
    """Servers in precedence order (global first), the project servers waiting for approval (never started)
    and one note per ignored or invalid thing."""

    model_config = ConfigDict(frozen=True)
    servers: list[McpServerConfig] = Field(default_factory=list)
    pending: list[PendingServer] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def enabled(self) -> list[McpServerConfig]:
        return [s for s in self.servers if s.enabled]

    def get(self, name: str) -> McpServerConfig | None:
        return next((s for s in self.servers if s.name == name), None)


def project_servers(project: Path, files: list[tuple[Path, Any]], notes: list[str]) -> list[McpServerConfig]:
    """The valid servers of a project's files (``trust_check.read_mcp_files``), a note for each bad one."""
    out: list[McpServerConfig] = []
    for path, data in files:
        try:
            if isinstance(data, ConfigError):
                raise data
            entries = iter_mcp_entries(data, origin=str(project))
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


def load_mcp_catalogue(config: GeodeConfig, *, home_root: Path, dotenv: Mapping[str, str]) -> McpCatalogue:
    """The global config's servers, then each trusted project's ``.geode/config.toml`` and ``.mcp.json``.

    A bad global entry is a ``ConfigError`` (the start-up check refuses it too); a bad or clashing project
    entry is skipped with a note, and so is a server whose ``${VAR}`` is unset (the environment, then
    ``dotenv``, the source's ``.env``). ``home_root`` is ``$GEODE_HOME``: its ``config.toml`` is never a
    project's.
    """
    declared = global_mcp_servers(config)
    notes: list[str] = []
    environ = {**dotenv, **os.environ}  # the environment first, as for keys
    servers = _expanded(declared, environ, notes)
    owner = {s.name: s.origin for s in declared}  # a name stays taken even if its server was skipped
    projects, trust_notes = trusted_projects(config.trust.projects)
    notes.extend(trust_notes)
    try:
        bindings = load_store(home_root).projects if projects else {}
    except ConfigError as exc:
        notes.append(f"MCP: {exc.message}")
        bindings = {}
    pending: list[PendingServer] = []
    for project in projects:
        found = _checked_project(project, bindings.get(str(project)), home_root, notes)
        if found is None:
            continue
        found, waiting = _approved(found, bindings[str(project)], project, notes)
        pending.extend(waiting)
        for server in found:
            taken = owner.get(server.name)
            if taken is None:
                owner[server.name] = server.origin
                continue
            winner = "the global server" if taken == "global" else f"the one from {taken}"
            notes.append(f"MCP: server {server.name!r} of project {project} ignored: {winner} has that name")
        mine = [s for s in found if owner[s.name] == str(project)]
        servers.extend(_expanded(mine, environ, notes))
    return McpCatalogue(servers=servers, pending=pending, notes=notes)


def global_mcp_servers(config: GeodeConfig) -> list[McpServerConfig]:
    """The snapshot's ``[mcp.servers]`` and ``mcpServers`` servers (a bad entry is a ``ConfigError``)."""
    tables = {  # the typed entries, as the loader reads them (it names the entry and maps type/disabled)
        "mcp": {"servers": {n: s.model_dump(exclude_defaults=True) for n, s in config.mcp.servers.items()}},
        "mcpServers": {n: s.model_dump(exclude_defaults=True) for n, s in config.mcp_servers.items()},
    }
    return parse_mcp_servers(tables)


def _checked_project(
    project: Path, binding: Binding | None, home_root: Path, notes: list[str]
) -> list[McpServerConfig] | None:
    """The project's servers when its trust still holds (re-checked now); else a note and ``None``."""
    again = f"run `geode trust {project}` again if you trust it as it is now"
    if binding is None:
        notes.append(
            f"MCP: trust of {project} is not bound to a directory (listed by hand, or trusted by an older "
            f"GEODE): its servers are not started; {again}"
        )
        return None
    try:
        fd = open_trusted(project, binding)
    except TrustDropped as exc:
        notes.append(f"MCP: trust dropped for {project}: {exc.message}; its servers are not started; {again}")
        return None
    try:
        return project_servers(project, read_mcp_files(fd, project, home_root=home_root), notes)
    finally:
        os.close(fd)


def _approved(
    found: list[McpServerConfig], binding: Binding, project: Path, notes: list[str]
) -> tuple[list[McpServerConfig], list[PendingServer]]:
    """Split into the servers `geode trust` approved as they are and those waiting for approval."""
    ok: list[McpServerConfig] = []
    waiting: list[PendingServer] = []
    for server in found:
        approved = binding.servers.get(server.name)
        if approved == fingerprint(server):
            ok.append(server)
            continue
        why = "new" if approved is None else "changed"
        waiting.append(PendingServer(server=server, why=why))
        what = "is new" if approved is None else "runs something else (command, args, cwd, url or env names)"
        notes.append(
            f"MCP: server {server.name!r} of project {project} {what} since `geode trust`: pending approval, "
            f"not started; run `geode trust {project}` to review and approve it"
        )
    return ok, waiting


__all__ = ["McpCatalogue", "PendingServer", "load_mcp_catalogue", "project_servers"]
