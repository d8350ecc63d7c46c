"""A fake control socket for CLI tests: a ROUTER on a home's ``cli.sock``, on its own thread, that records the
type of every message and answers each request from a table or from a test's own ``answer`` function."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import zmq

from actors.cli.client import ControlClient
from geode.home import GeodeHome
from geode.protocol import codec
from geode.protocol import control as c
from geode.protocol.envelope import Envelope

# the request, its sender's routing id → the reply body, or None when the function replied (or not) itself
Answer = Callable[[Envelope, bytes], dict[str, Any] | None]


def welcome(session_id: str = "s-1") -> dict[str, Any]:
    return c.Welcome(
        protocol_version=c.CONTROL_PROTOCOL,
        features=[],
        server_version="fake",
        connection_id="k1",
        session_id=session_id,
        model="m",
        provider="p",
        workspace="/",
    ).model_dump()


class FakeControl:
    """``with FakeControl(home, answers={c.PROMPT: {...}}) as fc``: a handshake gets :func:`welcome`, a type
    in ``answers`` its body, anything else ``{"ok": True}``; ``answer`` (if given) decides first."""

    def __init__(
        self,
        home: GeodeHome,
        answers: Mapping[str, dict[str, Any]] | None = None,
        answer: Answer | None = None,
    ) -> None:
        self.home = home
        self.answers = dict(answers or {})
        self.answer = answer
        self._later: list[tuple[float, bytes, Envelope]] = []  # (monotonic due time, to whom, what)
        self.seen: list[str] = []
        self._stop, self._ready = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fake-control", daemon=True)
        self._sock: Any = None

    def __enter__(self) -> FakeControl:
        self.home.cli_socket.parent.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        assert self._ready.wait(5), "the fake control socket did not bind"
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(5)

    def send(self, ident: bytes, env: Envelope) -> None:
        """Send ``env`` to the client ``ident`` (from the socket's thread: call it from ``answer`` only)."""
        self._sock.send_multipart([ident, codec.encode(env)])

    def send_later(self, delay_s: float, ident: bytes, env: Envelope) -> None:
        """Send ``env`` to ``ident`` ``delay_s`` from now (call it from ``answer``: the socket's thread)."""
        self._later.append((time.monotonic() + delay_s, ident, env))

    def _send_due(self) -> None:
        now = time.monotonic()
        due = [x for x in self._later if x[0] <= now]
        self._later = [x for x in self._later if x[0] > now]
        for _, ident, env in due:
            self.send(ident, env)

    def _serve(self) -> None:
        self._sock = zmq.Context.instance().socket(zmq.ROUTER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(f"ipc://{self.home.cli_socket}")
        self._ready.set()
        try:
            while not self._stop.is_set():
                self._send_due()
                if not self._sock.poll(20):
                    continue
                ident, frame = self._sock.recv_multipart()
                env = codec.decode(frame)
                self.seen.append(env.type)
                if env.kind != "request":
                    continue
                if self.answer is not None:
                    body = self.answer(env, ident)
                    if body is None:
                        continue
                elif env.type == c.HANDSHAKE:
                    body = welcome()
                else:
                    body = self.answers.get(env.type, {"ok": True})
                self.send(ident, env.reply_ok(body))
        finally:
            self._sock.close(0)


@contextmanager
def connected_client(tmp_path: Path, answer: Any) -> Iterator[ControlClient]:
    """A client connected (IPC, not a tty) to a fake control answering with ``answer``, a callable that is
    given the fake as its ``fc`` attribute (to send casts and late replies itself)."""
    home = GeodeHome(tmp_path / "gh").ensure()
    with FakeControl(home, answer=answer) as fc:
        answer.fc = fc
        cl = ControlClient(home, client_version="test")
        try:
            cl.connect(timeout_s=5.0, is_tty=False, mode="IPC")
            yield cl
        finally:
            cl.close()
