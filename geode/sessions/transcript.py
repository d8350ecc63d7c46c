"""A session's transcript: ``$GEODE_HOME/transcripts/<session>.jsonl``, one line per message (0600).

Written as checkpoints are saved (``TranscriptingRecords`` wraps the loop's record client), handed to hooks
as ``transcript_path``, and read back by the CLI for the last exchanges and a session's first prompt.
A line is compact UTF-8 JSON (no spaces after ``,`` and ``:``; written by pydantic's encoder, ~5x cheaper
than ``json.dumps`` for a tool result's text; a value JSON lacks is written as text: its JSON form in
pydantic, else its ``str``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_core import to_json

from geode.home import GeodeHome

log = logging.getLogger(__name__)
DIR_NAME = "transcripts"
_SAFE = re.compile(r"^[A-Za-z0-9._-]{1,120}$")
_TAIL_BYTES = 64 * 1024


def transcripts_dir(root: Path) -> Path:
    return root / DIR_NAME


def transcript_path(root: Path, session_id: str) -> Path:
    """The transcript file of a session under the home ``root`` (odd ids become a hash, never a path)."""
    name = session_id if _SAFE.match(session_id) and session_id not in (".", "..") else ""
    if not name:
        name = "s-" + hashlib.sha256(session_id.encode()).hexdigest()[:32]
    return transcripts_dir(root) / f"{name}.jsonl"


def ensure_transcript(root: Path, session_id: str) -> Path:
    """Create the transcripts directory (0700) and an empty transcript (0600) when missing; returns it."""
    d = transcripts_dir(root)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = transcript_path(root, session_id)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.close(fd)
    return path


def hook_transcript_path(session_id: str | None, root: Path | None = None) -> str | None:
    """The ``transcript_path`` a hook receives: an existing file of this session (None without a session)."""
    if not session_id:
        return None
    root = root or GeodeHome.from_env().root
    if not root.is_dir():  # no home (a hook runner outside a tree): never create one just for this
        return None
    try:
        return str(ensure_transcript(root, session_id))
    except OSError as exc:
        log.warning("no transcript for hook of session %s: %s", session_id, exc)
        return None


def _last_index(path: Path) -> int:
    """Index of the last message line in the file (-1 when empty or unreadable)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - _TAIL_BYTES))
            tail = fh.read().splitlines()
    except OSError:
        return -1
    for raw in reversed(tail):
        try:
            return int(json.loads(raw)["index"])
        except (ValueError, KeyError, TypeError):
            continue
    return -1


KEEP_OPEN = 8  # sessions whose transcript a writer keeps open (the least recently written closed first)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _close_all(fds: OrderedDict[str, tuple[int, int]]) -> None:
    while fds:
        os.close(fds.popitem()[1][0])


class TranscriptWriter:
    """Appends saved messages to their session's transcript; a message index is written once.

    The transcripts of the last :data:`KEEP_OPEN` sessions written stay open (``O_APPEND``), so a save
    costs a ``stat`` and a ``write`` (no ``fstat``: the size after it is the stat's plus what it wrote), not
    an open and a text wrapper; a file removed or replaced since
    (another inode at the path: a kept descriptor holds its own inode, so the number is not reused while
    it is open) is opened again."""

    def __init__(self, root: Path, keep_open: int = KEEP_OPEN) -> None:
        self.root = root
        self.keep_open = keep_open
        self._lock = threading.Lock()
        # session -> (inode, size, last index) after this writer's last append: while the file is still
        # that (nobody else appended), its tail is not read again on every save
        self._wrote: dict[str, tuple[int, int, int]] = {}
        self._paths: dict[str, Path] = {}
        self._fds: OrderedDict[str, tuple[int, int]] = OrderedDict()  # session -> (fd, its inode)
        weakref.finalize(self, _close_all, self._fds)

    def close(self) -> None:
        with self._lock:
            _close_all(self._fds)

    def append(self, session_id: str, base_count: int, messages: Iterable[dict[str, Any]]) -> int:
        """Write messages ``base_count, base_count+1, …`` not yet in the file; returns how many."""
        msgs = list(messages)
        with self._lock:
            path = self._paths.get(session_id) or transcript_path(self.root, session_id)
            try:
                st = os.stat(path)
            except OSError:
                path = ensure_transcript(self.root, session_id)
                st = os.stat(path)
            wrote = self._wrote.get(session_id)
            last = wrote[2] if wrote and wrote[:2] == (st.st_ino, st.st_size) else _last_index(path)
            lines = []
            for i, m in enumerate(msgs):
                index = base_count + i
                if index <= last:
                    continue
                row = {
                    "index": index,
                    "session_id": session_id,
                    "ts": time.time(),
                    "role": m.get("role"),
                    "content": m.get("content", []),
                    "metadata": m.get("metadata", {}),
                }
                lines.append(to_json(row, fallback=str))
            size = st.st_size
            if lines:
                fd = self._open(session_id, path, st.st_ino)
                data = b"\n".join(lines) + b"\n"
                _write_all(fd, data)
                # the size the file has when nobody else wrote since the stat (no fstat): were it other
                # (an append between, another inode at the path), the next stat differs and the tail is read
                size += len(data)
                last = base_count + len(msgs) - 1
            self._wrote.pop(session_id, None)
            self._wrote[session_id] = (st.st_ino, size, last)
            self._paths[session_id] = path
            while len(self._wrote) > 256:
                self._wrote.pop(next(iter(self._wrote)))
            while len(self._paths) > 256:
                self._paths.pop(next(iter(self._paths)))
            return len(lines)

    def _open(self, session_id: str, path: Path, inode: int) -> int:
        """The session's kept descriptor when it is still the file at ``path``, else the file opened now."""
        kept = self._fds.pop(session_id, None)
        if kept is not None and kept[1] == inode:
            self._fds[session_id] = kept
            return kept[0]
        if kept is not None:
            os.close(kept[0])
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._fds[session_id] = (fd, os.fstat(fd).st_ino)
        while len(self._fds) > self.keep_open:
            os.close(self._fds.popitem(last=False)[1][0])
        return fd


class TranscriptingRecords:
    """A record client whose successful checkpoint saves also go to the session transcript.

    Every other call passes through unchanged; a transcript failure is logged, never raised.
    """

    def __init__(self, inner: Any, root: Path) -> None:
        self._inner = inner
        self.transcripts = TranscriptWriter(root)

    def save_checkpoint(self, save: Any) -> Any:
        out = self._inner.save_checkpoint(save)
        try:
            self.transcripts.append(save.session_id, save.base_count, save.new_messages)
        except Exception as exc:  # the transcript is a convenience copy; the store is the record
            log.warning("transcript of %s not written: %s", save.session_id, exc)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


# --- reading ---------------------------------------------------------------------------------------------


def read_rows(path: Path) -> Iterator[dict[str, Any]]:
    try:
        fh = path.open(encoding="utf-8")
    except OSError:
        return
    with fh:
        for raw in fh:
            try:
                row = json.loads(raw)
            except ValueError:
                continue
            if isinstance(row, dict):
                yield row


def _text(row: dict[str, Any]) -> str:
    blocks = row.get("content") or []
    return "".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text")


def _is_prompt(row: dict[str, Any]) -> bool:
    if row.get("role") != "user":
        return False
    origin = (row.get("metadata") or {}).get("origin")
    if origin is not None:
        return origin == "user_input"
    blocks = row.get("content") or []
    has_results = any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks)
    return bool(_text(row)) and not has_results


@dataclass(frozen=True)
class Exchange:
    prompt: str
    answer: str
    tools: tuple[str, ...] = ()
    ts: float = 0.0


def exchanges(path: Path) -> list[Exchange]:
    """Each user prompt with the turn's last assistant text and the tools it called, in order."""
    out: list[Exchange] = []
    prompt: str | None = None
    answer, tools, ts = "", [], 0.0
    for row in read_rows(path):
        if _is_prompt(row):
            if prompt is not None:
                out.append(Exchange(prompt, answer, tuple(tools), ts))
            prompt, answer, tools, ts = _text(row), "", [], float(row.get("ts") or 0.0)
        elif row.get("role") == "assistant" and prompt is not None:
            text = _text(row)
            if text.strip():
                answer = text
            tools += [
                str(b.get("name"))
                for b in row.get("content") or []
                if isinstance(b, dict) and b.get("type") == "tool_use"
            ]
    if prompt is not None:
        out.append(Exchange(prompt, answer, tuple(tools), ts))
    return out


def last_exchanges(root: Path, session_id: str, n: int = 3) -> list[Exchange]:
    return exchanges(transcript_path(root, session_id))[-n:] if n > 0 else []


def first_prompt(root: Path, session_id: str) -> str:
    for row in read_rows(transcript_path(root, session_id)):
        if _is_prompt(row):
            return _text(row)
    return ""
