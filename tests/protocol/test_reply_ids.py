"""A served reply's id (envelope.reply_wire): 24 hex characters like new_id()'s, unique in a process (a
counter) and across processes (a random prefix per process, drawn again in a forked child)."""

from __future__ import annotations

import os
import re

from geode.protocol import envelope
from geode.protocol.envelope import Envelope, reply_wire


def _reply_id() -> str:
    req = Envelope(type="x.y", body={})
    out = reply_wire(req, "ok", {"a": 1}, "srv")
    assert out["corr"] == req.id
    return str(out["id"])


def test_reply_ids_are_24_hex_and_unique() -> None:
    ids = [_reply_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(re.fullmatch(r"[0-9a-f]{24}", i) for i in ids)
    assert Envelope(id=ids[0], type="x.y").id == ids[0]  # a valid envelope id


def test_a_forked_child_draws_its_own_prefix() -> None:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its prefix, as reply ids start with it
        os.write(w, envelope._reply_prefix.encode())
        os._exit(0)
    os.close(w)
    child = os.read(r, 64).decode()
    os.close(r)
    os.waitpid(pid, 0)
    assert len(child) == 10 and child != envelope._reply_prefix
    assert _reply_id().startswith(envelope._reply_prefix)
