"""Every str map key msgpack's unpackers return in this process, for tests that a flow's ids never become
map keys (msgpack interns each one it unpacks; CPython 3.12's interned strings are immortal)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from geode.protocol import frame_unpack


class Keys:
    """Every str map key the wrapped unpackers return."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def walk(self, obj: Any) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                if isinstance(k, str):
                    self.seen.add(k)
                self.walk(v)
        elif isinstance(obj, list | tuple):
            for v in obj:
                self.walk(v)

    def wrap(self, real: Any) -> Any:
        def unpackb(*a: Any, **kw: Any) -> Any:
            out = real(*a, **kw)
            self.walk(out)
            return out

        return unpackb


def watch_keys(monkeypatch: pytest.MonkeyPatch) -> Keys:
    """Wrap the frame and record unpackers (until ``monkeypatch`` undoes it): the keys fill as they run."""
    k = Keys()
    monkeypatch.setattr(frame_unpack, "_unpackb", k.wrap(frame_unpack._unpackb))  # bound at import
    monkeypatch.setattr(msgpack, "unpackb", k.wrap(msgpack.unpackb))  # codec, records (lmdb_env)
    return k
