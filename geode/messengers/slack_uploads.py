"""``send_file`` on Slack: slack_sdk's ``files_upload_v2`` — ``files.getUploadURLExternal`` (bot token, the
API host), the bytes POSTed to the upload URL it returns (slack_sdk sends no token there), then
``files.completeUploadExternal`` sharing the file in the chat's channel (and thread), the caption as the
message's ``initial_comment``.

Errors say whether the file may have been shared: a refusal of step 1 or 3 and a failed step 2 are "not
posted" (the share is step 3, refused or never asked); a lost answer to step 3 may have shared it."""

from __future__ import annotations

from typing import Any

from slack_sdk.errors import SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

from geode.messengers.errors import NotPosted

_STEP2_FAILED = "Failed to upload a file"  # slack_sdk's message when the upload URL did not answer 200


async def upload_v2(
    web: AsyncWebClient, channel: str, thread_ts: str | None, filename: str, data: bytes, comment: str
) -> list[str]:
    """Share ``data`` as ``filename`` in ``channel`` (threaded under ``thread_ts``), ``comment`` the message
    text (mrkdwn, already escaped); the shared file's id (Slack's answer names the file, not the message)."""
    try:
        done: Any = await web.files_upload_v2(
            filename=filename,
            file=data,
            title=filename,
            channel=channel,
            thread_ts=thread_ts,
            initial_comment=comment or None,
        )
    except SlackRequestError as exc:
        if str(exc).startswith(_STEP2_FAILED):  # never completed: nothing is shared
            raise NotPosted(f"files.upload: {str(exc)[:200]}") from exc
        raise
    files = done.get("files") or []
    return [str(f.get("id") or "") for f in files if isinstance(f, dict)]
