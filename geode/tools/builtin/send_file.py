"""send_file: posts a file from the workspace to the session's own chat as an attachment (a chat's DAEMON turn
only). The file is read through the file tools' roots and credential exclusions (a descriptor opened inside
the boundary, never a FIFO or device); the messengers child posts exactly those bytes (size and sha256 travel
with the path) through the platform's SDK. The executor receipts the call: at most once, by operation id."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from geode.protocol.errors import GeodeError
from geode.tools.builtin.files import boundary, resolve
from geode.tools.builtin.fs_guard import Refused, fd_path, open_regular
from geode.tools.handlers import ToolEnv, ToolFailure

MAX_FILE_BYTES = 20 * 1024 * 1024  # geode.messengers.uploads.MAX_FILE_BYTES
NOTHING = "Nothing was posted."


def own_chat(env: ToolEnv) -> str:
    """The chat this turn came from (``"<platform>:<channel key>"``); refused for any other turn."""
    rule = env.service("send_rule")
    try:
        chat = rule.own_chat(env.ctx) if rule is not None and not env.service("worker_host") else ""
    except GeodeError as exc:
        why = f"send_file: {exc.message} {NOTHING}"
        raise ToolFailure(why, "tool_policy_denied", reason="not_a_chat") from None
    if not chat:
        why = f"send_file posts only to a chat session's own chat; this turn is not one. {NOTHING}"
        raise ToolFailure(why, "tool_policy_denied", reason="not_a_chat")
    return str(chat)


def read_checked(env: ToolEnv, raw: str) -> tuple[str, bytes]:
    """The file's real path and bytes, read inside the boundary (refused otherwise, or when too large)."""
    path = resolve(env, raw)
    try:
        fd = open_regular(path, boundary(env))
    except FileNotFoundError:
        raise ToolFailure(f"{raw} is not a file. {NOTHING}", "file_not_found") from None
    except Refused as exc:
        extra = {"reason": exc.reason} if exc.reason else {}
        raise ToolFailure(f"{raw}: {exc.message}. {NOTHING}", exc.error_type, **extra) from None
    try:
        if os.fstat(fd).st_size > MAX_FILE_BYTES:
            raise ToolFailure(f"{raw} is larger than {MAX_FILE_BYTES} bytes. {NOTHING}", "file_too_large")
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        real = str(fd_path(fd, path))
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_FILE_BYTES:
        raise ToolFailure(f"{raw} is larger than {MAX_FILE_BYTES} bytes. {NOTHING}", "file_too_large")
    return real, data


def send_file(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    chat = own_chat(env)
    real, data = read_checked(env, str(args["path"]))
    sender = env.service("messengers")
    if sender is None or not hasattr(sender, "send_file"):
        raise ToolFailure(
            f"send_file is unavailable here (no messengers service). {NOTHING}", "tool_unavailable"
        )
    name = str(args.get("filename") or os.path.basename(real))[:255] or "file"
    sent = sender.send_file(
        chat,
        real,
        filename=name,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        caption=str(args.get("caption") or ""),
        idempotency_key=env.ctx.operation_id,
        session_id=env.ctx.session_id,
    )
    return {"sent": True, "channel": chat, "filename": name, "bytes": len(data), **dict(sent or {})}
