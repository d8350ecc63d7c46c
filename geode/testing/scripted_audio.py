"""The scripted provider's OpenAI audio transcription wire: ``POST /v1/audio/transcriptions`` (multipart,
as the official SDK's ``audio.transcriptions.create`` sends it). It answers the scripted transcript (or a
scripted error) and records each upload (model, file name, content type, size, sha256, the bytes), apart
from the model requests, so a test sees exactly what was sent for transcription."""

from __future__ import annotations

import hashlib
import threading
from email.message import Message
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

from geode.testing.scenario import ScriptedError

PATH_SUFFIX = "/audio/transcriptions"
DEFAULT_TRANSCRIPT = "scripted transcript"


def is_transcription(path: str) -> bool:
    return path.split("?", 1)[0].rstrip("/").endswith(PATH_SUFFIX)


def form_parts(content_type: str, raw: bytes) -> dict[str, tuple[str, str, bytes]]:
    """A ``multipart/form-data`` body by field name: (file name or "", content type, bytes)."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    msg = BytesParser(policy=HTTP).parsebytes(head + raw)
    out: dict[str, tuple[str, str, bytes]] = {}
    if not msg.is_multipart():
        return out
    for part in msg.iter_parts():
        assert isinstance(part, Message)
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        data = part.get_payload(decode=True)
        body = data if isinstance(data, bytes) else b""
        out[name] = (part.get_filename() or "", part.get_content_type(), body)
    return out


class Transcriptions:
    """What the endpoint answers (``answer``: a transcript or a :class:`ScriptedError`) and what it got."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answer: str | ScriptedError = DEFAULT_TRANSCRIPT
        self._uploads: list[dict[str, Any]] = []

    def set_answer(self, answer: str | ScriptedError) -> None:
        with self._lock:
            self._answer = answer

    @property
    def uploads(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(u) for u in self._uploads]

    def handle(self, content_type: str, auth: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for one request; the upload is recorded first."""
        parts = form_parts(content_type, raw)
        file_name, file_type, data = parts.get("file", ("", "", b""))
        model = parts.get("model", ("", "", b""))[2].decode("utf-8", "replace")
        with self._lock:
            self._uploads.append(
                {
                    "model": model,
                    "file_name": file_name,
                    "content_type": file_type,
                    "size": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "data": data,
                    "authorized": auth.startswith("Bearer ") and len(auth) > len("Bearer "),
                }
            )
            answer = self._answer
        if not data or not model:
            return 400, _error(400, "a transcription needs a file and a model")
        if isinstance(answer, ScriptedError):
            return answer.status, _error(answer.status, answer.message)
        return 200, {"text": answer}


def _error(status: int, message: str) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
