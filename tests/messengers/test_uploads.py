"""send_file's post in the messengers child reads only the bytes the executor checked: the same size and
sha256, a regular file not reached through a symlink; anything else is refused (nothing posted)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from geode.messengers.uploads import checked_bytes
from geode.protocol import messengers as messengers_msg
from geode.protocol.errors import BadRequest


def _req(path: Path, data: bytes) -> messengers_msg.SendFile:
    return messengers_msg.SendFile(
        channel="telegram:1", path=str(path), filename=path.name, size=len(data),
        sha256=hashlib.sha256(data).hexdigest(), idempotency_key="op-1",
    )  # fmt: skip


def test_the_checked_bytes_are_read_and_a_changed_or_swapped_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "report.txt"
    f.write_bytes(b"checked")
    req = _req(f, b"checked")
    assert checked_bytes(req) == b"checked"
    f.write_bytes(b"CHECKED")  # same size, other bytes
    with pytest.raises(BadRequest, match="changed since it was checked; nothing was posted"):
        checked_bytes(req)
    f.write_bytes(b"checked and more")
    with pytest.raises(BadRequest, match="changed since it was checked"):
        checked_bytes(req)
    secret = tmp_path / "secret"
    secret.write_bytes(b"checked")
    f.unlink()
    f.symlink_to(secret)  # swapped for a link after the check: not followed
    with pytest.raises(BadRequest, match="cannot be read"):
        checked_bytes(req)
