"""`geode trust PATH` and `--list` in the domain: bind a project to its directory as it is now and approve its
current MCP servers (saying what changed since the last approval), and each trusted project's state."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from geode.protocol.errors import ConfigError
from geode.tools.mcp.catalogue import project_servers
from geode.tools.mcp.trust import read_trust_list, trust_add, trust_remove
from geode.tools.mcp.trust_check import TrustDropped, identity_now, open_trusted, read_mcp_files
from geode.tools.mcp.trust_store import Binding, edit_store, fingerprint, load_store


@dataclass
class BindReport:
    """What one `geode trust PATH` did: ``changed`` means the running executor must reload."""

    path: Path
    added: bool  # newly listed in [trust] projects
    rebound: str = ""  # why the earlier binding no longer held ("" when it did, or there was none)
    approved: list[tuple[str, str]] = field(default_factory=list)  # (name, "new" | "changed")
    withdrawn: list[str] = field(default_factory=list)  # approvals of servers no longer defined
    servers: list[str] = field(default_factory=list)  # every server the project defines now
    notes: list[str] = field(default_factory=list)  # bad entries (ignored)

    @property
    def changed(self) -> bool:
        return self.added or bool(self.rebound or self.approved or self.withdrawn)


def trust_project(config_file: Path, home_root: Path, directory: str | os.PathLike[str]) -> BindReport:
    """Trust ``directory`` (resolved once, here) as it is now; refused when it is not a directory the daemon's
    user owns and only it can write (a ``ConfigError`` naming why; nothing is recorded)."""
    path = Path(directory).expanduser().resolve()
    if not path.is_dir():
        raise ConfigError(f"{path}: not a directory; trust a project directory")
    identity = identity_now(path)
    before = Binding(identity=identity)
    with edit_store(home_root) as store:
        old = store.projects.get(str(path))
        rebound = ""
        if old is not None and old.identity != identity:
            rebound = f"then: {old.identity.text()}; now: {identity.text()}"
        elif old is not None:
            before = old
        fd = open_trusted(path, before)
        try:
            notes: list[str] = []
            servers = project_servers(path, read_mcp_files(fd, path, home_root=home_root), notes)
        finally:
            os.close(fd)
        now = {s.name: fingerprint(s) for s in servers}
        approved = [
            (n, "changed" if n in before.servers else "new")
            for n, f in now.items()
            if before.servers.get(n) != f
        ]
        withdrawn = [n for n in before.servers if n not in now]
        store.projects[str(path)] = Binding(identity=identity, servers=now)
    where, added = trust_add(config_file, path)  # after: both take the home directory's lock
    return BindReport(where, added, rebound, approved, withdrawn, list(now), notes)


def untrust_project(config_file: Path, home_root: Path, directory: str) -> tuple[Path, bool]:
    """Stop trusting ``directory`` (as given or resolved) and forget its binding."""
    where, changed = trust_remove(config_file, directory)
    with edit_store(home_root) as store:
        gone = [k for k in store.projects if k in (directory, str(where))]
        for key in gone:
            del store.projects[key]
    return where, changed or bool(gone)


def trust_states(config_file: Path, home_root: Path) -> list[tuple[str, str]]:
    """``(entry, state)`` per trusted project, re-checked now ("trusted (servers: …)", "trust dropped: …")."""
    try:
        bindings = load_store(home_root).projects
    except ConfigError as exc:
        return [(entry, f"not loaded: {exc.message}") for entry in read_trust_list(config_file)]
    out: list[tuple[str, str]] = []
    for entry in read_trust_list(config_file):
        out.append(
            (entry, _state(Path(os.path.abspath(Path(entry).expanduser())), bindings.get(entry), home_root))
        )
    return out


def _state(path: Path, binding: Binding | None, home_root: Path) -> str:
    if binding is None:
        return f"not bound to a directory: run `geode trust {path}`"
    try:
        fd = open_trusted(path, binding)
    except TrustDropped as exc:
        return f"trust dropped: {exc.message}; run `geode trust {path}` again if you trust it as it is now"
    try:
        servers = project_servers(path, read_mcp_files(fd, path, home_root=home_root), [])
    finally:
        os.close(fd)
    ok = [s.name for s in servers if binding.servers.get(s.name) == fingerprint(s)]
    waiting = [s.name for s in servers if s.name not in ok]
    text = f"trusted (servers: {', '.join(ok) or 'none'})"
    if waiting:
        text += f"; pending approval: {', '.join(waiting)} (run `geode trust {path}`)"
    return text
