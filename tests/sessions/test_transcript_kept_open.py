"""The transcript a loop worker appends at every checkpoint save stays open between saves (issue 34, session
5): a save opens no file while the transcript is the one it wrote last, a removed or replaced transcript is
opened again (nothing written to the old inode), and a writer holds at most ``keep_open`` descriptors."""

from __future__ import annotations

import json
import os
import pathlib
from pathlib import Path
from typing import Any

import pytest

from geode.sessions.transcript import TranscriptingRecords, TranscriptWriter, transcript_path


class _Save:
    def __init__(self, session_id: str, base_count: int, n: int) -> None:
        self.session_id, self.base_count = session_id, base_count
        self.new_messages = [
            {"role": "user", "content": [{"type": "text", "text": f"m{base_count + i} é"}]} for i in range(n)
        ]


class _Store:
    def save_checkpoint(self, save: Any) -> str:
        return "saved"


@pytest.fixture
def opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every file opened (os.open, Path.open) while the test runs."""
    seen: list[str] = []
    os_open, path_open = os.open, pathlib.Path.open

    def counting_os_open(path: Any, *a: Any, **k: Any) -> int:
        seen.append(str(path))
        return os_open(path, *a, **k)

    def counting_path_open(self: Path, *a: Any, **k: Any) -> Any:
        seen.append(str(self))
        return path_open(self, *a, **k)

    monkeypatch.setattr(os, "open", counting_os_open)
    monkeypatch.setattr(pathlib.Path, "open", counting_path_open)
    return seen


def _indexes(path: Path) -> list[int]:
    return [json.loads(line)["index"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_twenty_saves_open_the_transcript_once(tmp_path: Path, opens: list[str]) -> None:
    records = TranscriptingRecords(_Store(), tmp_path)
    for k in range(20):
        assert records.save_checkpoint(_Save("s-1", 2 * k, 2)) == "saved"
    path = transcript_path(tmp_path, "s-1")
    # created, its tail read (the first save), opened for appends: once for the 20 saves
    assert len([p for p in opens if p == str(path)]) <= 3, opens
    assert _indexes(path) == list(range(40))
    assert "m39 é" in path.read_text(encoding="utf-8")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    records.transcripts.close()


def test_a_removed_or_replaced_transcript_is_opened_again(tmp_path: Path, opens: list[str]) -> None:
    writer = TranscriptWriter(tmp_path)
    writer.append("s-2", 0, _Save("s-2", 0, 2).new_messages)
    path = transcript_path(tmp_path, "s-2")
    path.unlink()  # e.g. the operator removed it: the next save starts a new file, not the unlinked inode
    writer.append("s-2", 2, _Save("s-2", 2, 1).new_messages)
    assert _indexes(path) == [2]
    moved = path.with_name("old.jsonl")
    path.rename(moved)
    path.write_text("", encoding="utf-8")  # replaced by another file at the same path
    writer.append("s-2", 3, _Save("s-2", 3, 1).new_messages)
    writer.append("s-2", 4, _Save("s-2", 4, 1).new_messages)
    assert _indexes(path) == [3, 4]
    assert _indexes(moved) == [2]  # nothing went to the replaced file's inode
    before = len(opens)
    for k in range(5, 10):
        writer.append("s-2", k, _Save("s-2", k, 1).new_messages)
    assert len(opens) == before, opens[before:]  # kept open again
    assert _indexes(path) == list(range(3, 10))
    writer.close()


def _open_under(root: Path) -> int:
    """This process's open descriptors on files under ``root`` (another thread's fds do not count)."""
    n = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed since the listing
            continue
        n += target.startswith(f"{root}/")
    return n


def test_a_writer_keeps_at_most_keep_open_descriptors(tmp_path: Path) -> None:
    writer = TranscriptWriter(tmp_path, keep_open=3)
    assert _open_under(tmp_path) == 0
    for round_ in range(2):
        for n in range(6):
            writer.append(f"s-{n}", round_, _Save(f"s-{n}", round_, 1).new_messages)
    assert _open_under(tmp_path) == 3
    for n in range(6):
        assert _indexes(transcript_path(tmp_path, f"s-{n}")) == [0, 1]
    writer.close()
    assert _open_under(tmp_path) == 0


def test_an_append_costs_a_stat_and_a_write_not_an_fstat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = TranscriptWriter(tmp_path)
    writer.append("s-3", 0, _Save("s-3", 0, 2).new_messages)  # created and opened: its fstat is the open's
    calls: list[str] = []
    for name in ("stat", "fstat", "write"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda *a, _r=real, _n=name, **k: (calls.append(_n), _r(*a, **k))[1])
    for k in range(1, 11):
        writer.append("s-3", 2 * k, _Save("s-3", 2 * k, 2).new_messages)
    monkeypatch.undo()
    assert sorted(calls) == ["stat"] * 10 + ["write"] * 10, calls  # 3 a save before: stat, write, fstat
    assert _indexes(transcript_path(tmp_path, "s-3")) == list(range(22))
    writer.close()


def test_a_line_another_writer_appended_meanwhile_is_read_not_trusted(tmp_path: Path) -> None:
    """The size kept after a write is the stat's plus what it wrote: a line appended by someone else between
    the stat and the write leaves the file larger, so the next save reads the tail again."""
    writer = TranscriptWriter(tmp_path)
    writer.append("s-4", 0, _Save("s-4", 0, 2).new_messages)
    path = transcript_path(tmp_path, "s-4")
    real_open = writer._open

    def open_after_a_foreign_line(session_id: str, p: Path, inode: int) -> int:
        with p.open("a", encoding="utf-8") as fh:  # another process's append, after this writer's stat
            fh.write(json.dumps({"index": 7, "session_id": "s-4", "role": "user", "content": []}) + "\n")
        return real_open(session_id, p, inode)

    writer._open = open_after_a_foreign_line  # type: ignore[method-assign]
    writer.append("s-4", 2, _Save("s-4", 2, 1).new_messages)
    writer._open = real_open  # type: ignore[method-assign]
    assert writer._wrote["s-4"][1] < path.stat().st_size  # not taken for this writer's file: read again
    # the file now ends with index 2 after the foreign 7: the tail read says 2, so 3.. are written once
    assert writer.append("s-4", 2, _Save("s-4", 2, 3).new_messages) == 2
    assert _indexes(path) == [0, 1, 7, 2, 3, 4]
    writer.close()
