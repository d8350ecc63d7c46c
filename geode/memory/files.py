"""MEMORY.md files: read under the cap (a file edited past it is cut, with a notice), edited by entry
(``add`` / ``replace`` / ``remove``) with atomic, serialized writes, and searched by words.

A file is Markdown; an *entry* is a line starting ``- `` and the indented lines after it (anything before
the first entry, a heading written by hand, is kept as is). ``memory_save`` appends, replaces or removes one
entry; a write that would leave the file past the cap is refused with nothing written (one that shrinks a
file already past it is allowed, so an over-full memory can be cleaned). Secrets are masked before writing
(geode/redaction.py), as for every other durable write."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from geode.memory.scopes import MEMORY_FILE, memory_paths, memory_root, parse_scope, writable_path
from geode.memory.settings import MAX_BYTES
from geode.redaction import mask_secrets

ACTIONS = ("add", "replace", "remove")
MAX_ENTRY_CHARS = 2000


class MemoryRefused(Exception):
    """A memory edit that did not happen (nothing written): ``error_type`` names why."""

    def __init__(self, message: str, error_type: str) -> None:
        super().__init__(message)
        self.message, self.error_type = message, error_type


@dataclass(frozen=True)
class LoadedMemory:
    """One MEMORY.md as the prompt sees it: at most the cap, ``truncated`` when the file is longer."""

    path: Path
    text: str
    size: int  # the file's size in bytes
    truncated: bool


def load(path: Path, max_bytes: int = MAX_BYTES) -> LoadedMemory | None:
    """The file's text up to ``max_bytes`` (cut at a character boundary); None when absent or unreadable."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            data = f.read(max_bytes + 1)
    except (FileNotFoundError, IsADirectoryError, PermissionError, NotADirectoryError):
        return None
    truncated = len(data) > max_bytes or size > max_bytes
    text = data[:max_bytes].decode("utf-8", "ignore" if truncated else "replace")
    return LoadedMemory(path, text, max(size, len(data)), truncated)


def entries(text: str) -> tuple[list[str], list[str]]:
    """``(preamble lines, entries)``: an entry is a ``- `` line and the lines after it up to the next one."""
    preamble: list[str] = []
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith("- "):
            out.append(line)
        elif out:
            out[-1] += "\n" + line
        else:
            preamble.append(line)
    return preamble, [e.rstrip() for e in out]


def _render(preamble: list[str], items: list[str]) -> str:
    head = "\n".join(preamble).strip()
    body = "\n".join(items)
    return "\n\n".join(p for p in (head, body) if p) + ("\n" if head or body else "")


def as_entry(text: str) -> str:
    """One entry from the model's text: secrets masked, a leading bullet dropped, later lines indented."""
    clean, _ = mask_secrets(text.strip())
    clean = clean.removeprefix("- ").strip()
    if not clean:
        raise MemoryRefused("memory_save: text is empty", "invalid_input")
    if len(clean) > MAX_ENTRY_CHARS:
        raise MemoryRefused(f"memory_save: an entry is at most {MAX_ENTRY_CHARS} characters", "invalid_input")
    lines = [ln.rstrip() for ln in clean.splitlines() if ln.strip()]
    return "- " + "\n  ".join(lines)


def edited(current: str, action: str, text: str, match: str | None) -> str:
    """``current`` with one entry added, replaced or removed (a MemoryRefused when it cannot apply)."""
    preamble, items = entries(current)
    if action == "add":
        return _render(preamble, [*items, as_entry(text)])
    if action not in ACTIONS:
        raise MemoryRefused(f"memory_save: action must be one of {', '.join(ACTIONS)}", "invalid_input")
    needle = (match if match else (text if action == "remove" else "")).strip()
    if not needle:
        raise MemoryRefused(
            f"memory_save {action}: give match, a piece of the entry to change", "invalid_input"
        )
    hits = [i for i, e in enumerate(items) if needle in e]
    if not hits:
        raise MemoryRefused(f"memory_save {action}: no entry contains {needle[:80]!r}", "memory_no_match")
    if len(hits) > 1:
        raise MemoryRefused(
            f"memory_save {action}: {len(hits)} entries contain {needle[:80]!r}; give a longer match",
            "memory_ambiguous_match",
        )
    if action == "remove":
        return _render(preamble, items[: hits[0]] + items[hits[0] + 1 :])
    return _render(preamble, [*items[: hits[0]], as_entry(text), *items[hits[0] + 1 :]])


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on the file's folder (``.lock`` beside it), across processes."""
    fd = os.open(path.parent / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str) -> None:
    """``text`` into ``path`` by a temporary file in the same folder, fsynced, then renamed over it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class MemoryFiles:
    """The memory of every scope under one ``$GEODE_HOME``: the executor's ``memory`` service."""

    def __init__(self, home_root: Path, max_bytes: int = MAX_BYTES, projects: Sequence[str] = ()) -> None:
        self.home_root = Path(home_root)
        self.max_bytes = max_bytes
        self.projects = tuple(projects)  # [trust] projects: a trusted project's own memory is searched too
        self._mu = threading.Lock()  # one writer per process; the folder lock covers the others

    def path(self, scope: str) -> Path:
        parse_scope(scope)
        path = writable_path(scope, self.home_root)
        if path is None:
            raise MemoryRefused(
                "this session has no memory (an MCP session or one without a scope)", "memory_unavailable"
            )
        return path

    def save(self, scope: str, action: str, text: str, match: str | None = None) -> dict[str, object]:
        """Apply one edit to ``scope``'s MEMORY.md; refused (nothing written) past the cap."""
        path = self.path(scope)
        if action not in ACTIONS:
            raise MemoryRefused(f"memory_save: action must be one of {', '.join(ACTIONS)}", "invalid_input")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with self._mu, _locked(path):
            try:
                current = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                current = ""
            new = edited(current, action, text, match)
            size, before = len(new.encode("utf-8")), len(current.encode("utf-8"))
            if size > self.max_bytes and size > before:
                raise MemoryRefused(
                    f"memory is full: this {action} would make it {size} bytes, the cap is {self.max_bytes} "
                    "([memory] max_bytes); replace or remove entries first. Nothing was written.",
                    "memory_full",
                )
            write_atomic(path, new)
        return {"action": action, "entries": len(entries(new)[1]), "bytes": size, "max_bytes": self.max_bytes}

    def search(
        self, scope: str, query: str, *, workspace: str = "", trusted: bool = False
    ) -> list[dict[str, str]]:
        """The entries of ``scope``'s memory holding every word of ``query`` (case-insensitive)."""
        words = [w for w in query.casefold().split() if w]
        if not words:
            raise MemoryRefused("memory_search: query is empty", "invalid_input")
        out: list[dict[str, str]] = []
        for path in memory_paths(scope, self.home_root, workspace=workspace or None, trusted=trusted):
            loaded = load(path, self.max_bytes)
            if loaded is None:
                continue
            for entry in entries(loaded.text)[1]:
                if all(w in entry.casefold() for w in words):
                    out.append({"file": str(path), "entry": entry})
        return out


def over_cap(home_root: Path, max_bytes: int = MAX_BYTES) -> list[tuple[Path, int]]:
    """Every MEMORY.md under ``$GEODE_HOME/memory`` larger than the cap, with its size (`geode doctor`)."""
    out: list[tuple[Path, int]] = []
    for path in sorted(memory_root(Path(home_root)).rglob(MEMORY_FILE)):
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if size > max_bytes:
            out.append((path, size))
    return out
