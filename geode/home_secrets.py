"""Secrets GEODE makes for itself in ``$GEODE_HOME/keys/`` on first use (the chat session-id key, the
``geode mcp --http`` token): created 0600 once, atomically, never overwritten; an existing one is accepted
only as a regular file of ours that group and world cannot read."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

from geode.home import GeodeHome
from geode.private_dir import ensure_private_dir
from geode.protocol.errors import ConfigError

SESSION_ID_KEY = "session-id.key"  # HMAC key of chat session ids (geode/messengers/sessions.py)
MCP_HTTP_TOKEN = "mcp-http.token"  # the bearer token of `geode mcp --http` on loopback


def session_id_key_path(home: GeodeHome) -> Path:
    return home.keys_dir / SESSION_ID_KEY


def mcp_http_token_path(home: GeodeHome) -> Path:
    return home.keys_dir / MCP_HTTP_TOKEN


def session_id_key(home: GeodeHome) -> bytes:
    """The home's key for chat session ids (32 random bytes, hex in the file); made on first use."""
    text, _ = read_or_create(session_id_key_path(home), lambda: secrets.token_hex(32), "session-id key")
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < 16:
        raise ConfigError(
            f"{session_id_key_path(home)} is not a session-id key (want 64 hex digits); remove it to make a "
            "new one (every chat then starts a new session)"
        )
    return key


def read_or_create(path: Path, make: Callable[[], str], what: str) -> tuple[str, bool]:
    """``path``'s text (stripped) and whether this call created it (with ``make()``, 0600, in a 0700 keys
    folder). Two processes racing both get the one that was linked in first."""
    existing = _read(path, what)
    if existing is not None:
        return existing, False
    ensure_private_dir(path.parent, "keys folder")
    value = make()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(value + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # fails when the file exists: never overwrites one made meanwhile
        except FileExistsError:
            raced = _read(path, what)
            if raced is None:
                raise ConfigError(f"{what} {path}: appeared and vanished while it was being made") from None
            return raced, False
    finally:
        tmp.unlink(missing_ok=True)
    return value, True


def _read(path: Path, what: str) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot open it ({exc.strerror}; a symlink is refused)") from exc
    with os.fdopen(fd, "r") as f:
        st = os.fstat(f.fileno())
        mode = stat.S_IMODE(st.st_mode)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{what} {path} is not a regular file")
        if st.st_uid != os.geteuid():
            raise ConfigError(f"{what} {path} is owned by uid {st.st_uid}, not by this user")
        if mode & 0o077:
            raise ConfigError(
                f"{what} {path} is readable by others (mode {mode:04o}): it may have leaked; remove it to "
                "make a new one (or chmod 600 it to keep it)"
            )
        return f.read().strip()
