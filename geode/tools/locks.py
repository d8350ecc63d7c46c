"""Process-wide keyed resource locks: keys come from a tool's resource strategy, taken in sorted order."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from geode.tools.paths import resolve_in
from geode.tools.spec import ToolContext, ToolSpec


class ResourceKeyError(ValueError):
    """The tool's resource strategy cannot produce a key for these arguments."""


def resource_keys(
    spec: ToolSpec, args: Mapping[str, Any], ctx: ToolContext, workspace: Path
) -> tuple[str, ...]:
    """Lock keys for one call. ``None`` strategy (read tools) → no keys."""
    strategy = spec.policy.resource_strategy
    if not strategy:
        if spec.policy.effect.value != "read":
            raise ResourceKeyError(f"'{spec.name}' ({spec.policy.effect.value}) declares no resource policy")
        return ()
    if strategy == "file_path":
        raw = args.get("file_path") or args.get("path")
        if not raw:
            raise ResourceKeyError(f"'{spec.name}' needs a file_path argument for its lock")
        return (f"file:{os.path.normcase(resolve_in(workspace, str(raw)))}",)
    if strategy == "channel_recipient":
        channel, recipient = args.get("channel"), args.get("recipient")
        if not channel or not recipient:
            raise ResourceKeyError(f"'{spec.name}' needs channel and recipient for its lock")
        return (f"msg:{channel}\x1f{recipient}",)
    if strategy == "session":
        return (f"session:{ctx.session_id}:{spec.name}",)
    if strategy == "workspace":
        return (f"workspace:{workspace}",)
    if strategy.startswith("keys:"):  # declared keys (an MCP server's resource_keys): one lock each
        keys = tuple(f"key:{k}" for k in strategy.removeprefix("keys:").split(",") if k)
        if not keys:
            raise ResourceKeyError(f"'{spec.name}' declares an empty key list")
        return keys
    if strategy.startswith("global:"):
        return (f"global:{strategy.removeprefix('global:')}",)
    raise ResourceKeyError(f"unknown resource strategy {strategy!r} for '{spec.name}'")


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


class KeyedLocks:
    """One lock per key, shared by every session in this process; entries vanish when unused (bounded)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    def _ref(self, key: str) -> _Entry:
        with self._guard:
            e = self._entries.get(key)
            if e is None:
                e = self._entries[key] = _Entry()
            e.users += 1
            return e

    def _unref(self, key: str) -> None:
        with self._guard:
            e = self._entries[key]
            e.users -= 1
            if e.users == 0:
                del self._entries[key]

    def acquire(self, keys: tuple[str, ...], timeout_s: float) -> LockSet | None:
        """Take every key (sorted, de-duplicated) within ``timeout_s``; ``None`` (nothing held) on timeout."""
        ordered = sorted(set(keys))
        held: list[str] = []
        deadline = time.monotonic() + max(0.0, timeout_s)
        try:
            for key in ordered:
                entry = self._ref(key)
                if not entry.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    self._unref(key)
                    self._release(held)
                    return None
                held.append(key)
        except BaseException:
            self._release(held)
            raise
        return LockSet(self, tuple(held))

    def _release(self, keys: list[str] | tuple[str, ...]) -> None:
        for key in reversed(keys):
            with self._guard:
                e = self._entries[key]
            e.lock.release()
            self._unref(key)

    def held_keys(self) -> list[str]:
        with self._guard:
            return sorted(k for k, e in self._entries.items() if e.lock.locked())


class LockSet:
    """Held keys; ``release()`` is idempotent so every exit path may call it."""

    def __init__(self, owner: KeyedLocks, keys: tuple[str, ...]) -> None:
        self._owner = owner
        self.keys = keys
        self._released = False
        self._mu = threading.Lock()

    def release(self) -> None:
        with self._mu:
            if self._released:
                return
            self._released = True
        self._owner._release(self.keys)
