"""``send_file`` on Discord: one message with the file attached, as discord.py sends it (multipart
``POST /channels/{id}/messages``: ``payload_json`` and ``files[0]``), the caption its content, no pings,
and an enforced nonce so discord.py's own retry of the POST returns the message already created instead of
a second one."""

from __future__ import annotations

import io
import secrets
import warnings

from geode.messengers.discord_errors import discord_call

# discord.py's voice player imports audioop (deprecated since 3.11); GEODE uses no voice
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord
    from discord.http import handle_message_parameters

MAX_CONTENT = 2000


async def attach_file(
    http: discord.http.HTTPClient, channel: int, filename: str, data: bytes, caption: str
) -> list[str]:
    """Post ``data`` as the attachment ``filename`` in ``channel`` (a thread's id for a thread); the id of
    the message that carries it."""
    file = discord.File(io.BytesIO(data), filename=filename)
    params = handle_message_parameters(
        content=caption[:MAX_CONTENT] or None,
        file=file,
        allowed_mentions=discord.AllowedMentions.none(),
        nonce=secrets.token_hex(12),
    )
    try:
        sent = await discord_call("send_message", http.send_message(channel, params=params))
    finally:
        file.close()
    return [str(sent["id"])]
