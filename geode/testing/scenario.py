"""Scenarios for the scripted provider: replies (text, tool calls, errors, delays) and recorded requests."""

from __future__ import annotations

import base64
import hashlib
import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SECRET_HEADERS = frozenset(
    {"authorization", "x-api-key", "cookie", "proxy-authorization", "chatgpt-account-id"}
)

Wire = Literal["anthropic-messages", "openai-chat", "openai-responses", "oauth-token", "unknown"]


class ScriptedToolCall(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None  # generated when absent


class ScriptedError(BaseModel):
    """An HTTP error reply; ``headers`` may carry ``retry-after`` or ``x-should-retry``."""

    model_config = ConfigDict(frozen=True)
    status: int = 500
    type: str = ""  # provider error type, e.g. "overloaded_error"; derived from status when empty
    message: str = "scripted error"
    headers: dict[str, str] = Field(default_factory=dict)
    code: str | None = None  # OpenAI error code, e.g. "context_length_exceeded"


class ScriptedUsage(BaseModel):
    model_config = ConfigDict(frozen=True)
    input_tokens: int = 10
    output_tokens: int = 5
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class ScriptedReply(BaseModel):
    """One scripted answer. ``chunks`` (when given) are the streamed text deltas; they join to ``text``."""

    model_config = ConfigDict(frozen=True)
    text: str = ""
    chunks: tuple[str, ...] | None = None
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    stop_reason: str | None = None  # wire stop reason override; derived when absent
    usage: ScriptedUsage = ScriptedUsage()
    error: ScriptedError | None = None
    delay_s: float = 0.0  # before the reply's headers are written
    chunk_delay_s: float = 0.0  # streamed: a pause before each SSE frame but the first (a slow stream)
    drop_connection: bool = False  # close the socket without a reply (a connection error client-side)
    stream_error_after_chunks: ScriptedError | None = None  # an SSE error event after the text deltas
    model: str | None = None  # echoed model id; defaults to the request's

    @model_validator(mode="after")
    def _text_from_chunks(self) -> ScriptedReply:
        """A reply given only as ``chunks`` has the joined chunks as its text (not an empty reply)."""
        if self.chunks and not self.text:
            object.__setattr__(self, "text", "".join(self.chunks))
        return self

    @property
    def text_chunks(self) -> tuple[str, ...]:
        if self.chunks is not None:
            return self.chunks
        return split_words(self.text)


def split_words(text: str) -> tuple[str, ...]:
    """Split text into word-sized deltas (each keeps its trailing space) so streams have several chunks."""
    if not text:
        return ()
    out: list[str] = []
    cur = ""
    for ch in text:
        cur += ch
        if ch == " ":
            out.append(cur)
            cur = ""
    if cur:
        out.append(cur)
    return tuple(out)


class RecordedRequest(BaseModel):
    """What the scripted server received: method, path, headers minus secrets, JSON body."""

    model_config = ConfigDict(frozen=True)
    method: str
    path: str
    wire: Wire
    headers: dict[str, str]
    body: Any = None
    index: int = 0

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    @property
    def images(self) -> list[dict[str, str]]:
        """Every image the request carried, in order, whatever the wire: ``media_type`` and ``sha256``
        (of the decoded bytes), so a test can tell which picture reached the model."""
        return [_image_of(part) for part in _parts(self.body) if _image_of(part)]


def _parts(body: Any) -> list[dict[str, Any]]:
    """The content parts of a request body's messages (Messages ``messages``, Chat, Responses ``input``)."""
    if not isinstance(body, dict):
        return []
    out: list[dict[str, Any]] = []
    for msg in (body.get("messages") or []) + (body.get("input") or []):
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, list):
            out.extend(p for p in content if isinstance(p, dict))
    return out


def _image_of(part: dict[str, Any]) -> dict[str, str]:
    """An image part as ``{media_type, sha256}`` (Anthropic ``image``, Chat ``image_url``, Responses
    ``input_image``), else ``{}``."""
    if part.get("type") == "image" and isinstance(part.get("source"), dict):
        media_type, data = str(part["source"].get("media_type", "")), str(part["source"].get("data", ""))
    elif part.get("type") in ("image_url", "input_image"):
        url = part.get("image_url")
        url = str(url.get("url", "") if isinstance(url, dict) else url or "")
        head, _, data = url.partition(";base64,")
        media_type = head.removeprefix("data:")
    else:
        return {}
    return {"media_type": media_type, "sha256": hashlib.sha256(base64.b64decode(data or b"")).hexdigest()}


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    """Secret headers become ``<redacted:xxxxxxxx>`` (a short digest, so tests can tell credentials apart)."""
    return {k.lower(): (_fingerprint(v) if k.lower() in SECRET_HEADERS else v) for k, v in headers.items()}


def _fingerprint(value: str) -> str:
    return f"<redacted:{hashlib.sha256(value.encode()).hexdigest()[:8]}>"


ReplyFunction = Callable[[RecordedRequest], "ScriptedReply | dict[str, Any] | str"]


class Scenario(BaseModel):
    """Replies served in order. When exhausted, ``repeat_last`` repeats the last one, else a terminal 500."""

    model_config = ConfigDict(frozen=True)
    replies: tuple[ScriptedReply, ...] = ()
    repeat_last: bool = False
    oauth_access_token: str | None = None  # issued by POST /oauth/token (codex refresh tests)

    @classmethod
    def of(cls, *replies: ScriptedReply | dict[str, Any] | str, **kw: Any) -> Scenario:
        return cls(replies=tuple(coerce_reply(r) for r in replies), **kw)


def coerce_reply(value: ScriptedReply | dict[str, Any] | str) -> ScriptedReply:
    if isinstance(value, ScriptedReply):
        return value
    if isinstance(value, str):
        return ScriptedReply(text=value)
    return ScriptedReply.model_validate(value)


def load_scenario(path: str | Path) -> Scenario:
    """A scenario from a ``.json`` or ``.toml`` file: ``{"replies": [...], "repeat_last": false}``.

    A bare JSON list is accepted as the replies. Strings are plain text replies.
    """
    p = Path(path)
    raw: Any
    if p.suffix == ".toml":
        raw = tomllib.loads(p.read_text())
    else:
        raw = json.loads(p.read_text())
    if isinstance(raw, list):
        raw = {"replies": raw}
    replies = [coerce_reply(r) for r in raw.get("replies", [])]
    return Scenario(**{**raw, "replies": tuple(replies)})
