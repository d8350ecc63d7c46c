"""The scripted provider: a local stdlib HTTP server speaking the Anthropic and OpenAI wires from a scenario.

Point a real SDK client at ``server.base_url`` (Anthropic) or ``server.openai_base_url`` (OpenAI, ``/v1``).
``server.audio`` is the OpenAI transcription endpoint (scripted_audio.py).
"""

from __future__ import annotations

import itertools
import json
import logging
import secrets
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from geode.testing import scripted_anthropic, scripted_audio, scripted_openai
from geode.testing.scenario import (
    RecordedRequest,
    ReplyFunction,
    Scenario,
    ScriptedError,
    ScriptedReply,
    Wire,
    coerce_reply,
    redact_headers,
)

EXHAUSTED = ScriptedReply(
    error=ScriptedError(
        status=500, message="scripted provider: scenario exhausted", headers={"x-should-retry": "false"}
    )
)


def wire_of(path: str) -> Wire:
    p = path.split("?", 1)[0].rstrip("/")
    if p.endswith("/messages"):
        return "anthropic-messages"
    if p.endswith("/chat/completions"):
        return "openai-chat"
    if p.endswith("/responses"):
        return "openai-responses"
    if p.endswith("/oauth/token"):
        return "oauth-token"
    return "unknown"

log = logging.getLogger(__name__)


class _QuietServer(ThreadingHTTPServer):
    """A client that went away mid-answer (a loop worker killed in a chaos run) is one log line, not a
    traceback on stderr; any other handler error is still printed in full."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError)):
            log.info("scripted provider: the client %s went away mid-answer (%s)", client_address, exc)
            return
        super().handle_error(request, client_address)


class ScriptedServer:
    """A thread-safe scripted LLM endpoint. ``start()`` binds 127.0.0.1 (port 0 = any); ``stop()``."""

    def __init__(
        self, scenario: Scenario | ReplyFunction | None = None, *, port: int = 0, host: str = "127.0.0.1"
    ):
        self._scenario = scenario if scenario is not None else Scenario()
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._cursor = 0
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._host, self._port = host, port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.audio = scripted_audio.Transcriptions()  # POST /v1/audio/transcriptions (not in ``requests``)

    # --- lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> ScriptedServer:
        handler = type("ScriptedHandler", (_Handler,), {"server_ref": self})
        self._httpd = _QuietServer((self._host, self._port), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name="scripted-provider", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("scripted server not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    # --- scenario -----------------------------------------------------------------------------------------
    def set_scenario(self, scenario: Scenario | ReplyFunction) -> None:
        with self._lock:
            self._scenario, self._cursor = scenario, 0

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_for(self, wire: Wire) -> list[RecordedRequest]:
        return [r for r in self.requests if r.wire == wire]

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()

    def _record(self, method: str, path: str, headers: dict[str, str], body: Any) -> RecordedRequest:
        with self._lock:
            rec = RecordedRequest(
                method=method,
                path=path,
                wire=wire_of(path),
                headers=redact_headers(headers),
                body=body,
                index=len(self._requests),
            )
            self._requests.append(rec)
            return rec

    def _next_reply(self, rec: RecordedRequest) -> ScriptedReply:
        with self._lock:
            scenario = self._scenario
            if isinstance(scenario, Scenario):
                if self._cursor < len(scenario.replies):
                    reply = scenario.replies[self._cursor]
                    self._cursor += 1
                    return reply
                if scenario.repeat_last and scenario.replies:
                    return scenario.replies[-1]
                return EXHAUSTED
        return coerce_reply(scenario(rec))

    def _oauth_reply(self) -> dict[str, Any]:
        with self._lock:
            scenario = self._scenario
        token = scenario.oauth_access_token if isinstance(scenario, Scenario) else None
        return {
            "access_token": token or f"scripted-access-{secrets.token_hex(4)}",
            "refresh_token": f"scripted-refresh-{secrets.token_hex(4)}",
            "id_token": "scripted-id-token",
            "expires_in": 3600,
        }

    def wait(self, seconds: float) -> None:
        """A scripted delay that ends early when the server stops."""
        self._stopping.wait(seconds)

    def next_id(self) -> str:
        return f"{next(self._ids):04d}"


class _Handler(BaseHTTPRequestHandler):
    server_ref: ScriptedServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = (
        True  # headers and body go out as separate writes; avoid 40 ms delayed-ACK stalls
    )

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr access logs
        return

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if scripted_audio.is_transcription(self.path):  # multipart, answered apart from the scenario
            auth = self.headers.get("authorization", "")
            self._send_json(*self.server_ref.audio.handle(self.headers.get("content-type", ""), auth, raw))
            return
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode(errors="replace")
        srv = self.server_ref
        rec = srv._record("POST", self.path, dict(self.headers.items()), body)
        if rec.wire == "oauth-token":
            self._send_json(200, srv._oauth_reply())
            return
        reply = srv._next_reply(rec)
        if reply.delay_s:
            srv.wait(reply.delay_s)
        if reply.drop_connection:
            self.close_connection = True
            self.connection.close()
            return
        model = reply.model or (body.get("model") if isinstance(body, dict) else None) or "scripted"
        if reply.error is not None:
            self._send_error(rec.wire, reply.error)
            return
        rid = srv.next_id()
        if rec.stream:
            self._send_stream(self._frames(rec, reply, model, rid), reply.chunk_delay_s)
        else:
            self._send_json(200, self._json(rec, reply, model, rid))

    do_GET = do_POST

    @staticmethod
    def _json(rec: RecordedRequest, reply: ScriptedReply, model: str, rid: str) -> dict[str, Any]:
        if rec.wire == "openai-chat":
            return scripted_openai.chat_json(reply, model, rid)
        if rec.wire == "openai-responses":
            return scripted_openai.response_json(reply, model, rid)
        return scripted_anthropic.message_json(reply, model, rid)

    @staticmethod
    def _frames(rec: RecordedRequest, reply: ScriptedReply, model: str, rid: str) -> Iterator[bytes]:
        if rec.wire == "openai-chat":
            opts = rec.body.get("stream_options") or {}
            return scripted_openai.chat_stream(reply, model, rid, bool(opts.get("include_usage")))
        if rec.wire == "openai-responses":
            return scripted_openai.response_stream(reply, model, rid)
        return scripted_anthropic.message_stream(reply, model, rid)

    def _send_error(self, wire: Wire, err: ScriptedError) -> None:
        if wire.startswith("openai"):
            body = scripted_openai.error_body(err)
        else:
            body = scripted_anthropic.error_body(err)
        self._send_json(err.status, body, err.headers)

    def _send_json(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_scripted_{self.server_ref.next_id()}")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, frames: Iterator[bytes], pause_s: float = 0.0) -> None:
        # chunked, as the vendors' APIs send a stream: the connection stays open for the client's next
        # request (keep-alive), so a turn's rounds do not each pay a new TCP connection
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        try:
            for i, frame in enumerate(frames):
                if pause_s and i:
                    self.server_ref.wait(pause_s)
                if frame:  # (an empty chunk would end the body)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return


ScriptedProvider = ScriptedServer  # the name the issue uses
