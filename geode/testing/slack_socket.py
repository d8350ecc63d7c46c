"""The Socket Mode side of the local Slack server: the websocket links, the envelopes waiting for one, the
acks the clients send, and the redelivery of an ``events_api`` envelope nobody acked in time."""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import WSMsgType, web

from geode.testing import slack_events as ev
from geode.testing.slack_events import JSON


class SocketHub:
    """Envelopes go to the newest link (queued while there is none). An ``events_api`` envelope not acked
    within ``redeliver_after_s`` is sent again with a new ``envelope_id``, the same ``event_id`` and
    ``retry_attempt`` + 1, at most ``max_retries`` times; an ack of any envelope of an event settles it.
    Thread-safe; websocket work runs on the server's loop (``loop`` is set once it runs)."""

    def __init__(self, *, redeliver_after_s: float, max_retries: int) -> None:
        self.redeliver_after_s, self.max_retries = redeliver_after_s, max_retries
        self.loop: asyncio.AbstractEventLoop | None = None
        self.tickets: set[str] = set()  # issued by apps.connections.open
        self._lock = threading.Lock()
        self._conns: list[web.WebSocketResponse] = []
        self._outbox: deque[JSON] = deque()
        self._sent: list[JSON] = []  # every envelope written to a link, in order
        self._key_of: dict[str, str] = {}  # envelope id -> event_id (events_api) or the envelope id
        self._settled: set[str] = set()  # keys of acked envelopes
        self._acks: list[str] = []
        self._tasks: set[asyncio.Future[Any]] = set()

    # -- any thread ------------------------------------------------------------------------------------
    def queue(self, envelope: JSON) -> None:
        with self._lock:
            self._outbox.append(copy.deepcopy(envelope))
        self._call_soon(self.dispatch)

    def disconnect(self, reason: str) -> None:
        self._call_soon(lambda: self._broadcast(ev.disconnect(reason)))

    def acks(self) -> list[str]:
        with self._lock:
            return list(self._acks)

    def envelopes(self) -> list[JSON]:
        with self._lock:
            return copy.deepcopy(self._sent)

    def connections(self) -> int:
        with self._lock:
            return len(self._conns)

    def _call_soon(self, fn: Callable[[], None]) -> None:
        loop = self.loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(fn)
            except RuntimeError:  # closed meanwhile
                pass

    # -- on the loop -----------------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        """``GET /slack-ws?ticket=...``: hello, then envelopes out and acks in until the link closes."""
        with self._lock:
            known = request.query.get("ticket", "") in self.tickets
        if not known:
            return web.Response(status=401, text="invalid ticket")
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        with self._lock:
            self._conns.append(ws)
            count = len(self._conns)
        try:
            await ws.send_str(json.dumps(ev.hello(count)))
            self.dispatch()
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    self._on_frame(msg.data)
        finally:
            with self._lock:
                if ws in self._conns:
                    self._conns.remove(ws)
        return ws

    async def close_all(self) -> None:
        with self._lock:
            conns, self._conns = list(self._conns), []
        for ws in conns:
            await ws.close(code=1001, message=b"server stopping")

    def dispatch(self) -> None:
        with self._lock:
            if not self._conns or not self._outbox:
                return
            ws, batch = self._conns[-1], list(self._outbox)
            self._outbox.clear()
        self._spawn(self._send(ws, batch))

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:  # keeps the task referenced until done
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, ws: web.WebSocketResponse, batch: list[JSON]) -> None:
        for i, envelope in enumerate(batch):
            record = copy.deepcopy(envelope)
            with self._lock:  # recorded before the write: the client may read it before this task resumes
                self._sent.append(record)
                eid = envelope.get("envelope_id", "")
                self._key_of[eid] = (envelope.get("payload") or {}).get("event_id") or eid
            try:
                await ws.send_str(json.dumps(envelope))
            except (ConnectionError, RuntimeError):
                with self._lock:
                    self._sent.remove(record)  # not written after all: it goes out again on the next link
                    self._outbox.extendleft(reversed(batch[i:]))
                return
            if envelope.get("type") == "events_api" and self.loop is not None:
                self.loop.call_later(self.redeliver_after_s, self._redeliver, envelope)

    def _redeliver(self, envelope: JSON) -> None:
        with self._lock:
            key = self._key_of.get(envelope["envelope_id"], envelope["envelope_id"])
            attempt = int(envelope.get("retry_attempt") or 0)
            if key in self._settled or attempt >= self.max_retries:
                return
            self._outbox.append({
                **copy.deepcopy(envelope),
                "envelope_id": ev.Clock.envelope_id(),
                "retry_attempt": attempt + 1,
                "retry_reason": "timeout",
            })  # fmt: skip
        self.dispatch()

    def _broadcast(self, frame: JSON) -> None:
        with self._lock:
            conns = list(self._conns)
        for ws in conns:
            self._spawn(ws.send_str(json.dumps(frame)))

    def _on_frame(self, data: str) -> None:
        try:
            frame = json.loads(data)
        except ValueError:
            return
        eid = frame.get("envelope_id") if isinstance(frame, dict) else None
        if isinstance(eid, str) and eid:
            with self._lock:
                self._acks.append(eid)
                self._settled.add(self._key_of.get(eid, eid))
