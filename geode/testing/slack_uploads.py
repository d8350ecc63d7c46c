"""Uploads on the local Slack server, as slack_sdk's ``files_upload_v2`` makes them:
``files.getUploadURLExternal`` hands out an upload URL on this server's own host, the bytes are POSTed there
(recorded with the ``Authorization`` header sent, if any), and ``files.completeUploadExternal`` shares the
file in a channel (and thread) as a bot message carrying the file, ``initial_comment`` its text. Every share
is recorded (channel, thread, file name, comment, the bytes) so a test sees what the bot posted, how often."""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass, field
from typing import Protocol

from aiohttp import web

from geode.testing import slack_events as ev
from geode.testing.slack_events import JSON, SlackError

MAX_FILE_BYTES = 1024 * 1024 * 1024  # Slack's limit for one file
UPLOAD_PATH = "/upload/v1"


@dataclass
class SlackUploads:
    """Files by id (``{"filename", "length", "data" (None until uploaded), "authorization", "shared"}``) and
    every share, in order (``{"channel", "thread_ts", "ts", "file_id", "filename", "comment", "data",
    "authorization"}``)."""

    files: dict[str, JSON] = field(default_factory=dict)
    shares: list[JSON] = field(default_factory=list)
    uploads: list[JSON] = field(default_factory=list)  # each POST to an upload URL: file id, status, header
    lock: threading.Lock = field(default_factory=threading.Lock)
    fail_uploads: int = 0  # the next this many POSTs to an upload URL answer 500 (the bytes not taken)

    def of(self, channel: str | None = None) -> list[JSON]:
        """The shares accepted (in ``channel``), in order."""
        with self.lock:
            return copy.deepcopy([s for s in self.shares if channel is None or s["channel"] == channel])

    def upload_posts(self) -> list[JSON]:
        """Each POST to an upload URL: ``{"file_id", "status", "authorization"}`` (the header as sent)."""
        with self.lock:
            return copy.deepcopy(self.uploads)

    def route(self, app: web.Application) -> None:
        app.router.add_post(UPLOAD_PATH + "/{file_id}", self._handle_upload)

    async def _handle_upload(self, request: web.Request) -> web.Response:
        fid, auth = request.match_info["file_id"], request.headers.get("Authorization", "")
        data = await request.read()
        with self.lock:
            file = self.files.get(fid)
            status = 404 if file is None or file["data"] is not None else 200
            if status == 200 and self.fail_uploads > 0:
                self.fail_uploads, status = self.fail_uploads - 1, 500
            if file is not None and status == 200:
                file.update(data=data, authorization=auth)
            self.uploads.append({"file_id": fid, "status": status, "authorization": auth})
        if status != 200:
            return web.Response(status=status, text="no such upload")
        return web.Response(text=f"OK - {len(data)}")


class Workspace(Protocol):
    """What of the fake workspace (``slack_server.LocalSlack``) the two methods read and change."""

    bot_user: str
    bot_id: str
    echo_bot_posts: bool
    uploads: SlackUploads
    _clock: ev.Clock
    _messages: dict[tuple[str, str], JSON]
    _posts: list[tuple[str, str]]

    @property
    def url(self) -> str: ...  # the server's own base URL: upload URLs are on its host

    def _queue_event(self, event: JSON) -> JSON: ...


def get_upload_url(slack: Workspace, params: JSON) -> JSON:
    """files.getUploadURLExternal: ``filename``, ``length`` → ``upload_url`` (this host) and ``file_id``."""
    filename = params.get("filename")
    try:
        length = int(params.get("length") or 0)
    except (TypeError, ValueError):
        raise SlackError("invalid_arguments") from None
    if not isinstance(filename, str) or not filename or length < 1:
        raise SlackError("invalid_arguments")
    if length > MAX_FILE_BYTES:
        raise SlackError("file_too_large")
    fid = "F" + slack._clock.ts().replace(".", "")
    with slack.uploads.lock:
        slack.uploads.files[fid] = {
            "filename": filename, "length": length, "data": None, "authorization": "", "shared": False,
        }  # fmt: skip
    return {"upload_url": f"{slack.url}{UPLOAD_PATH}/{fid}", "file_id": fid}


def _files(params: JSON) -> list[JSON]:
    raw = params.get("files")
    try:
        files = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        raise SlackError("invalid_arguments") from None
    if not isinstance(files, list) or not files or not all(isinstance(f, dict) for f in files):
        raise SlackError("invalid_arguments")
    return files


def complete_upload(slack: Workspace, params: JSON) -> JSON:
    """files.completeUploadExternal: each uploaded file shared once, in ``channel_id`` (a bot message with
    the files, ``initial_comment`` its text, in ``thread_ts``'s thread); without a channel, kept private."""
    files, channel = _files(params), params.get("channel_id") or None
    if channel is not None and (not isinstance(channel, str) or not ev.CHANNEL_ID.match(channel)):
        raise SlackError("channel_not_found")
    comment = params.get("initial_comment") or ""
    if not isinstance(comment, str) or len(comment) > ev.MAX_TEXT:
        raise SlackError("invalid_arguments")
    thread_ts = str(params["thread_ts"]) if params.get("thread_ts") else None
    with slack.uploads.lock:
        known = [slack.uploads.files.get(str(f.get("id") or "")) for f in files]
        if any(k is None or k["data"] is None or k["shared"] for k in known):
            raise SlackError("file_not_found")  # never uploaded, or completed already
        out = []
        for f, k in zip(files, known, strict=True):
            assert k is not None
            k["shared"] = True
            out.append({"id": str(f["id"]), "title": str(f.get("title") or k["filename"])})
        if channel is None:
            return {"files": out}
        ts = slack._clock.ts()
        msg = ev.bot_message(
            channel=channel, bot_user=slack.bot_user, bot_id=slack.bot_id, text=comment, ts=ts,
            thread_ts=thread_ts, blocks=None,
        )  # fmt: skip
        msg.update(subtype="file_share", files=[{**o, "name": k["filename"], "size": len(k["data"])}
                                                for o, k in zip(out, known, strict=True) if k])  # fmt: skip
        for o, k in zip(out, known, strict=True):
            assert k is not None
            slack.uploads.shares.append({
                "channel": channel, "thread_ts": thread_ts, "ts": ts, "file_id": o["id"],
                "filename": k["filename"], "comment": comment, "data": k["data"],
                "authorization": k["authorization"],
            })  # fmt: skip
    slack._messages[(channel, ts)] = msg
    slack._posts.append((channel, ts))
    if slack.echo_bot_posts:
        slack._queue_event(dict(msg))
    return {"files": out}
