"""``send_file``'s post in the messengers child: read the file the executor checked (the same bytes, or
refused), and upload it through the platform translator's ``send_file`` behind the poller's rate-limit gate.

Errors say whether anything may have been posted: ``BadRequest``/``Unavailable`` — nothing was (the receipt
settles "not sent"); any other ``GeodeError`` — it may have been (the receipt turns uncertain, never resent).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from typing import Any

from geode.messengers.errors import NotPosted, PlatformError, RateLimited, Rejected
from geode.protocol import messengers as messengers_msg
from geode.protocol.errors import BadRequest, ErrorCode, GeodeError, Unavailable

# GEODE's own cap, under Telegram's (50 MB) and Slack's (1 GB) limits for a bot's upload; Discord's is 10 MiB
# in a server without boosts: a bigger file is refused by Discord there (not posted)
MAX_FILE_BYTES = 20 * 1024 * 1024
READY_WAIT_S = 20.0
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def checked_bytes(req: messengers_msg.SendFile) -> bytes:
    """The bytes at ``req.path`` if they are still the ones the executor checked (size and sha256); else a
    ``BadRequest`` (nothing posted)."""
    if req.size > MAX_FILE_BYTES:
        raise BadRequest(f"{req.filename} is larger than {MAX_FILE_BYTES} bytes; nothing was posted")
    try:
        fd = os.open(req.path, _OPEN_FLAGS)
    except OSError as exc:
        raise BadRequest(f"{req.filename} cannot be read ({exc.strerror}); nothing was posted") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != req.size:
            raise BadRequest(f"{req.filename} changed since it was checked; nothing was posted")
        data = b""
        while len(data) <= req.size:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) != req.size or hashlib.sha256(data).hexdigest() != req.sha256:
        raise BadRequest(f"{req.filename} changed since it was checked; nothing was posted")
    return data


async def upload(poller: Any, channel_key: str, req: messengers_msg.SendFile, data: bytes) -> list[str]:
    """Upload ``data`` to the chat once the poller runs; the posted message ids."""
    send = getattr(poller.translator, "send_file", None)
    if send is None:
        raise Unavailable(f"send_file is not supported on {poller.platform} yet; nothing was posted")
    try:
        await asyncio.wait_for(poller.ready.wait(), READY_WAIT_S)
    except TimeoutError:
        raise Unavailable(f"the {poller.platform} poller is not running; nothing was posted") from None
    try:
        ids: list[str] = await poller.out.call(
            lambda: send(channel_key, req.filename, data, caption=req.caption)
        )
    except Rejected as exc:
        raise BadRequest(f"rejected by {poller.platform}: {exc}; nothing was posted") from exc
    except (RateLimited, NotPosted) as exc:
        raise Unavailable(f"{poller.platform} did not take the file ({exc}); nothing was posted") from exc
    except PlatformError as exc:  # a timeout or a server error mid-upload: it may have been posted
        why = f"maybe posted: {poller.platform} upload failed: {exc}"
        raise GeodeError(why, code=ErrorCode.INTERNAL) from exc
    return ids
