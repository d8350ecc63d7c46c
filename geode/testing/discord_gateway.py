"""The gateway half of the local Discord server: HELLO, heartbeat ACKs, IDENTIFY → READY + GUILD_CREATE,
RESUME replaying the dispatches after the client's last sequence number, and dropped connections. As on
Discord, an event reaches only the current session: none before the first IDENTIFY, and a new IDENTIFY
gets nothing dispatched before it (the client reads REST history for what it missed)."""

from __future__ import annotations

import asyncio
import copy
import secrets
from dataclasses import dataclass, field

from aiohttp import WSMsgType, web

from geode.testing import discord_events as ev
from geode.testing.discord_events import JSON

MESSAGE_CONTENT_INTENT = 1 << 15


@dataclass(eq=False)
class _Conn:
    """One gateway websocket; frames go out in order through ``outbox``."""

    ws: web.WebSocketResponse
    outbox: asyncio.Queue[JSON | None] = field(default_factory=asyncio.Queue)
    session: _Session | None = None


@dataclass(eq=False)
class _Session:
    """A gateway session: its dispatches by sequence number, replayed on RESUME."""

    session_id: str
    intents: int
    log: list[JSON] = field(default_factory=list)
    conn: _Conn | None = None
    replay_seen: bool = False  # the next RESUME replays every message/interaction (a misbehaving gateway)

    @property
    def seq(self) -> int:
        return int(self.log[-1]["s"]) if self.log else 0


class GatewaySessions:
    """The gateway state of :class:`~geode.testing.discord_server.LocalDiscord`, on its loop only: one
    current session (a new IDENTIFY replaces it, and the old one's undelivered events go with it); a
    dispatch while there is no session reaches no one (``undelivered`` counts it)."""

    token: str
    bot_id: int
    heartbeat_interval_ms: int
    message_content_enabled: bool  # the privileged intent is enabled for the app (else IDENTIFY → 4014)

    def __init__(self) -> None:
        self._session: _Session | None = None
        self._after_identify: list[tuple[str, JSON]] = []  # push_on_identify: sent right after READY
        self.undelivered = 0  # dispatches no session was there to take
        self._conns: set[_Conn] = set()
        self._identifies = self._resumes = 0
        self._closing = False

    @property
    def gateway_url(self) -> str:
        raise NotImplementedError

    def ready_payload(self, session_id: str) -> JSON:
        raise NotImplementedError

    def guild_payloads(self) -> list[JSON]:
        raise NotImplementedError

    async def _dispatch_async(self, event: str, data: JSON) -> None:
        self._dispatch(event, data)

    def _dispatch(self, event: str, data: JSON) -> None:
        session = self._session
        if session is None:
            self.undelivered += 1
            return
        frame = ev.dispatch(event, session.seq + 1, copy.deepcopy(data))  # later edits change no log entry
        session.log.append(frame)
        if session.conn is not None:
            session.conn.outbox.put_nowait(self._visible(frame, session))

    def _visible(self, frame: JSON, session: _Session) -> JSON:
        """Without the MESSAGE_CONTENT intent a message's content is empty unless it mentions the bot."""
        data = frame["d"]
        if frame["t"] != "MESSAGE_CREATE" or session.intents & MESSAGE_CONTENT_INTENT:
            return frame
        if any(u.get("id") == str(self.bot_id) for u in data.get("mentions", [])):
            return frame
        return {**frame, "d": {**data, "content": "", "embeds": [], "attachments": [], "components": []}}

    async def _gateway(self, request: web.Request) -> web.StreamResponse:
        if self._closing:
            return web.Response(status=503)  # shutting down: no new connection may hold up the shutdown
        ws = web.WebSocketResponse(max_msg_size=0, timeout=2.0)  # a close unanswered in 2 s is dropped
        await ws.prepare(request)
        conn = _Conn(ws)
        self._conns.add(conn)
        writer = asyncio.create_task(self._write(conn))
        conn.outbox.put_nowait(ev.hello(self.heartbeat_interval_ms))
        try:
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    continue
                payload = ev.loads(msg.data)
                if payload is not None:
                    await self._on_frame(conn, payload)
        finally:
            self._conns.discard(conn)
            if conn.session is not None and conn.session.conn is conn:
                conn.session.conn = None
            conn.outbox.put_nowait(None)
            await writer
        return ws

    async def _write(self, conn: _Conn) -> None:
        while (frame := await conn.outbox.get()) is not None:
            if conn.ws.closed:
                return
            try:
                await conn.ws.send_str(ev.dumps(frame))
            except (ConnectionError, RuntimeError):
                return

    async def _on_frame(self, conn: _Conn, payload: JSON) -> None:
        op, data = payload.get("op"), payload.get("d")
        if op == ev.OP_HEARTBEAT:
            conn.outbox.put_nowait({"op": ev.OP_HEARTBEAT_ACK, "d": None, "s": None, "t": None})
        elif op == ev.OP_IDENTIFY and isinstance(data, dict):
            if data.get("token") != self.token:
                await conn.ws.close(code=4004, message=b"Authentication failed.")
                return
            intents = int(data.get("intents") or 0)
            if intents & MESSAGE_CONTENT_INTENT and not self.message_content_enabled:
                await conn.ws.close(code=4014, message=b"Disallowed intent(s).")  # not enabled in the portal
                return
            self._identifies += 1
            self._identify(conn, intents)
        elif op == ev.OP_RESUME and isinstance(data, dict):
            session = self._session
            if (
                data.get("token") != self.token
                or session is None
                or data.get("session_id") != session.session_id
            ):
                conn.outbox.put_nowait({"op": ev.OP_INVALID_SESSION, "d": False, "s": None, "t": None})
                return
            self._resumes += 1
            self._resume(conn, session, int(data.get("seq") or 0))

    def _identify(self, conn: _Conn, intents: int) -> None:
        session = _Session(secrets.token_hex(16), intents)
        if self._session is not None and self._session.conn is not None:
            self._session.conn = None
        self._session, session.conn, conn.session = session, conn, session
        self._dispatch("READY", self.ready_payload(session.session_id))
        for guild in self.guild_payloads():  # one GUILD_CREATE per guild the bot is in
            self._dispatch("GUILD_CREATE", guild)
        after, self._after_identify = self._after_identify, []
        for event, data in after:
            self._dispatch(event, data)

    def _resume(self, conn: _Conn, session: _Session, seq: int) -> None:
        session.conn, conn.session = conn, session
        if session.replay_seen:
            seq, session.replay_seen = 0, False
            replay = [f for f in session.log if f["t"] in ("MESSAGE_CREATE", "INTERACTION_CREATE")]
        else:
            replay = [f for f in session.log if int(f["s"]) > seq]
        for frame in replay:
            conn.outbox.put_nowait(self._visible(frame, session))
        self._dispatch("RESUMED", {"_trace": ["geode-local-discord"]})

    async def _shut_gateway(self) -> None:
        self._closing = True
        await self._close_all(1001)

    async def _close_all(self, code: int) -> None:
        for conn in list(self._conns):
            await conn.ws.close(code=code)
