"""The project trust gate: ``[trust] projects`` in the global config, and the notes for untrusted projects.

A project's ``.geode/config.toml`` and ``.mcp.json`` start MCP servers (arbitrary commands), so they are read
only for directories the user recorded with ``geode trust``. The list is edited textually (no tomlkit): the
rest of ``config.toml``, comments included, is kept byte for byte, and every edit is re-parsed and checked
(``geode.config_file``: the lock, the read-for-edit and the checked atomic write).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from geode.config_file import edit_lock, parse_config, read_for_edit, write_checked
from geode.protocol.errors import ConfigError

PROJECT_FILES = (Path(".geode") / "config.toml", Path(".mcp.json"))
_HEADER = re.compile(r"^[ \t]*\[[ \t]*trust[ \t]*\][ \t]*(#.*)?$")
_ANY_HEADER = re.compile(r"^[ \t]*\[")
_PROJECTS_KEY = re.compile(r"^[ \t]*projects[ \t]*=[ \t]*", re.MULTILINE)


# -- reading ---------------------------------------------------------------------------------------------


def trusted_projects(projects: Sequence[str]) -> tuple[list[Path], list[str]]:
    """The snapshot's ``[trust] projects`` as absolute directories (symlinks not resolved), and a note per
    entry that is not one."""
    out: list[Path] = []
    notes: list[str] = []
    for entry in projects:
        if not Path(entry).expanduser().is_absolute():
            notes.append(f"trust.projects: {entry!r} is not an absolute path; ignored")
            continue
        path = Path(os.path.abspath(Path(entry).expanduser()))  # never resolved: a symlink is not followed
        if path not in out:
            out.append(path)
    return out, notes


def is_trusted(directory: str | os.PathLike[str], projects: Sequence[str]) -> bool:
    return _resolve(directory) in trusted_projects(projects)[0]


def project_config_files(project: Path, *, home_root: Path | None) -> list[Path]:
    """The project's ``.geode/config.toml`` and ``.mcp.json`` that exist (``$GEODE_HOME`` itself excluded)."""
    out: list[Path] = []
    for rel in PROJECT_FILES:
        path = project / rel
        if not _exists(path):
            continue
        if home_root is not None and rel.parts[0] == ".geode" and _same(path.parent, home_root):
            continue  # ~/.geode/config.toml is the global config, not a project's
        out.append(path)
    return out


def read_project_file(path: Path) -> dict[str, Any]:
    """``.geode/config.toml`` (TOML) or ``.mcp.json`` (JSON) as a mapping; unreadable → ``ConfigError``."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    return parse_project_file(path, raw)


def parse_project_file(path: Path, raw: bytes) -> dict[str, Any]:
    """The bytes of ``path`` (named for its suffix and in errors) as a mapping; bad → ``ConfigError``."""
    if path.suffix != ".json":
        data: Any = parse_config(raw, path)  # TOML: a one-line error naming the file, line and byte
    else:
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:  # JSON decode errors are ValueErrors
            first = str(exc).splitlines()[0] if str(exc) else repr(exc)
            raise ConfigError(f"{path}: cannot read: {first}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must hold an object with mcpServers, not {type(data).__name__}")
    return data


def declares_servers(path: Path) -> bool:
    """Whether a project file defines MCP servers (an unreadable one counts: it would be read if trusted)."""
    try:
        data = read_project_file(path)
    except ConfigError:
        return True
    mcp = data.get("mcp")
    servers = mcp.get("servers") if isinstance(mcp, Mapping) else None
    return bool(servers) or bool(data.get("mcpServers"))


def untrusted_project_note(
    cwd: str | os.PathLike[str], projects: Sequence[str], *, home_root: Path | None = None
) -> str | None:
    """One line when ``cwd`` or a parent (up to the user's home or ``/``) has project MCP servers that are
    ignored because that directory is not trusted; ``None`` otherwise."""
    home_root = home_root if home_root is not None else _geode_home()
    trusted = trusted_projects(projects)[0]
    untrusted: list[tuple[Path, list[Path]]] = []
    for directory in _walk_up(_resolve(cwd)):
        files = [p for p in project_config_files(directory, home_root=home_root) if declares_servers(p)]
        if files and directory not in trusted:
            untrusted.append((directory, files))
    if not untrusted:
        return None
    directory, files = untrusted[0]
    names = " and ".join(str(p.relative_to(directory)) for p in files)
    more = f" (and {len(untrusted) - 1} more untrusted director{'y' if len(untrusted) == 2 else 'ies'} above)"
    return (
        f"MCP servers in {directory} ({names}) are ignored: the project is not trusted; "
        f"run `geode trust {directory}` to load them{more if len(untrusted) > 1 else ''}"
    )


def _exists(path: Path) -> bool:
    return os.path.isfile(path)  # an unreadable parent (EACCES) is "absent", not an error


def _walk_up(start: Path) -> list[Path]:
    try:
        home = Path.home().resolve()
    except RuntimeError:
        home = None
    out: list[Path] = []
    for directory in (start, *start.parents):
        if directory == home:
            break
        out.append(directory)
    return out


def _geode_home() -> Path:
    return _resolve(os.environ.get("GEODE_HOME") or "~/.geode")


def _resolve(path: str | os.PathLike[str]) -> Path:
    return Path(path).expanduser().resolve()


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


# -- editing the global config -------------------------------------------------------------------------------


def read_trust_list(config_file: Path) -> list[str]:
    """``[trust] projects`` of the file as written (an absent file → ``[]``)."""
    return _projects_of(read_for_edit(config_file, "changing trust")[1], config_file)


def trust_add(config_file: Path, directory: str | os.PathLike[str]) -> tuple[Path, bool]:
    """Record ``directory`` (resolved) as trusted; ``(path, False)`` when it already was."""
    path = _resolve(directory)
    if not path.is_dir():
        raise ConfigError(f"{path}: not a directory; trust a project directory")
    with edit_lock(config_file):
        current = read_trust_list(config_file)
        if any(_resolve(p) == path for p in current if Path(p).expanduser().is_absolute()):
            return path, False
        _write_projects(config_file, [*current, str(path)])
    return path, True


def trust_remove(config_file: Path, directory: str | os.PathLike[str]) -> tuple[Path, bool]:
    """Forget ``directory`` (as given or resolved); ``(path, False)`` when it was not trusted."""
    path = _resolve(directory)

    def matches(entry: str) -> bool:
        return entry == str(directory) or (Path(entry).expanduser().is_absolute() and _resolve(entry) == path)

    with edit_lock(config_file):
        current = read_trust_list(config_file)
        kept = [p for p in current if not matches(p)]
        if len(kept) == len(current):
            return path, False
        _write_projects(config_file, kept)
    return path, True


def _projects_of(data: Mapping[str, Any], config_file: Path) -> list[str]:
    trust = data.get("trust", {})
    projects = trust.get("projects", []) if isinstance(trust, Mapping) else None
    if not isinstance(projects, list) or not all(isinstance(p, str) for p in projects):
        raise ConfigError(f"{config_file}: [trust] projects must be a list of directory paths")
    return list(projects)


def _write_projects(config_file: Path, projects: list[str]) -> None:
    """Replace ``[trust] projects`` in the text, check the result parses to exactly that, write atomically."""
    text, before = read_for_edit(config_file, "changing trust")
    new_text = _with_projects(text, projects)
    expected = {**before, "trust": {**(before.get("trust") or {}), "projects": projects}}
    write_checked(
        config_file,
        new_text,
        expected,
        "cannot edit [trust] automatically (it is written in an unusual form); "
        f"set it by hand: [trust] projects = {json.dumps(projects)}",
    )


def _render(projects: list[str]) -> str:
    if not projects:
        return "projects = []"
    items = "".join(f"    {json.dumps(p, ensure_ascii=False)},\n" for p in projects)
    return f"projects = [\n{items}]"


def _with_projects(text: str, projects: list[str]) -> str:
    lines = text.splitlines(keepends=True)
    header = next((i for i, line in enumerate(lines) if _HEADER.match(line.rstrip("\r\n"))), None)
    if header is None:
        if not text:
            return f"[trust]\n{_render(projects)}\n"
        return f"{text if text.endswith(chr(10)) else text + chr(10)}\n[trust]\n{_render(projects)}\n"
    start = sum(len(line) for line in lines[: header + 1])
    end = start
    for line in lines[header + 1 :]:
        if _ANY_HEADER.match(line):
            break
        end += len(line)
    section = text[start:end]
    key = _PROJECTS_KEY.search(section)
    if key is None:
        return f"{text[:start]}{_render(projects)}\n{text[start:]}"
    value_at = start + key.end()
    if not text.startswith("[", value_at):
        raise ConfigError("[trust] projects is not an array")
    value_end = _array_end(text, value_at)
    return f"{text[: start + key.start()]}{_render(projects)}{text[value_end:]}"


def _array_end(text: str, i: int) -> int:
    """Index just after the TOML array starting at ``text[i] == '['`` (strings and comments skipped)."""
    depth = 0
    while i < len(text):
        c = text[i]
        if c == "#":
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl
        elif c in "\"'":
            triple = c * 3
            if text.startswith(triple, i):
                close = text.find(triple, i + 3)
                i = len(text) if close < 0 else close + 2
            else:
                i += 1
                while i < len(text) and text[i] != c:
                    i += 2 if c == '"' and text[i] == "\\" else 1
        elif c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ConfigError("[trust] projects: unterminated array")
