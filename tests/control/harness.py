"""An in-process tree for control tests: real store (LMDB), the lanes actor, ControlCore, scripted worker."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actors.lanes import start_lanes_actor
from geode.control.core import ControlCore
from geode.home import GeodeHome
from geode.lanes.queue import LaneQueue
from geode.protocol import catalog
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol.envelope import Envelope
from geode.protocol.transport import LocalTransport, Request
from geode.records.engine import RecordEngine
from geode.records.service import StoreService
from geode.records.store_client import StoreClient
from tests.control.scripted_worker import ScriptedWorker as _Worker
from tests.lanes.harness import Driver


class Registry:
    """Services by name; every actor gets its own LocalTransport (its own sender) over the same registry."""

    def __init__(self) -> None:
        self.services: dict[str, Any] = {}
        self.transports: list[LocalTransport] = []

    def register(self, name: str, svc: Any) -> None:
        self.services[name] = svc
        for t in self.transports:
            t.register(name, svc)

    def transport(self, sender: str) -> LocalTransport:
        t = LocalTransport(dict(self.services), sender=sender)
        self.transports.append(t)
        return t


class FnService:
    def __init__(self, fn: Callable[[Request], Any]) -> None:
        self.fn = fn

    def handle(self, request: Request) -> Any:
        return self.fn(request)


class ScriptedWorker(_Worker):
    """The scripted worker registered in-process under its name."""

    def __init__(self, reg: Registry, name: str = "loop-1", incarnation: int = 1) -> None:
        super().__init__(reg.transport(f"{name}#{incarnation}"), name, incarnation)
        reg.register(name, FnService(self.handle))


class Client:
    """Collects what the core sends to one connection."""

    def __init__(self, core: ControlCore, conn_id: str) -> None:
        self.core, self.conn_id = core, conn_id
        self.frames: list[Envelope] = []  # a ``cli.events`` frame as its ``cli.event`` frames, as the CLI
        self.raw: list[Envelope] = []  # every frame as sent
        self.cond = threading.Condition()

    def push(self, env: Envelope) -> None:
        with self.cond:
            self.raw.append(env)
            if env.type == c.CLI_EVENTS:
                self.frames += [
                    env.model_copy(update={"type": c.CLI_EVENT, "body": e}) for e in env.body["events"]
                ]
            else:
                self.frames.append(env)
            self.cond.notify_all()

    def request(self, type_: str, body: dict[str, Any] | None = None, timeout: float = 5.0) -> Envelope:
        env = Envelope(type=type_, body=body or {})
        self.core.on_envelope(self.conn_id, env)
        return self.wait(lambda f: f.corr == env.id, timeout)

    def wait(self, pred: Callable[[Envelope], bool], timeout: float = 5.0) -> Envelope:
        with self.cond:
            found: list[Envelope] = []

            def check() -> bool:
                found[:] = [f for f in self.frames if pred(f)]
                return bool(found)

            assert self.cond.wait_for(check, timeout), f"no matching frame in {self.frames[-5:]}"
            return found[0]

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        with self.cond:
            return [
                f.body
                for f in self.frames
                if f.type == c.CLI_EVENT and (kind is None or f.body["kind"] == kind)
            ]

    def wait_done(self, turn_id: str, timeout: float = 5.0) -> dict[str, Any]:
        f = self.wait(
            lambda f: (
                f.type == c.CLI_EVENT
                and f.body["kind"] == lanes_msg.TURN_DONE
                and f.body["turn_id"] == turn_id
            ),
            timeout,
        )
        return f.body["data"]["result"]


class LocalCalls:
    """``ContinuedCalls`` over a LocalTransport: each call's reply handed to its callback on another thread
    (as the bus thread would); ``sent`` counts them."""

    def __init__(self, transport: LocalTransport) -> None:
        self.transport = transport
        self.sent = 0

    def call(self, target, type_, body, then, *, session=None, timeout_s=5.0):  # type: ignore[no-untyped-def]
        self.sent += 1

        def reply() -> None:
            try:
                out: Any = self.transport.call(target, type_, body, session=session, timeout_s=timeout_s)
            except Exception as exc:
                out = exc
            then(out)

        threading.Thread(target=reply, name="fake-bus", daemon=True).start()


class Tree:
    def __init__(self, tmp: Path, *, global_cap: int = 4, continued: bool = False) -> None:
        self.continued = continued
        self.jobs = 0  # jobs the core handed to its runner
        self.home = GeodeHome(tmp).ensure()
        self.engine = RecordEngine.for_home(self.home).open()
        self.reg = Registry()
        self.reg.register("store", StoreService(self.engine))
        self.clients: dict[str, Client] = {}
        self.global_cap = global_cap
        self.start_lanes()
        self.start_control()

    def start_lanes(self) -> None:
        t = self.reg.transport("lanes#1")
        self.lanes = Driver(start_lanes_actor(StoreClient(t), t, queue=LaneQueue(global_cap=self.global_cap)))
        self.reg.register("lanes", self.lanes)

    def start_control(self) -> None:
        t = self.reg.transport("control#1")
        self.calls = LocalCalls(t) if self.continued else None

        def runner(job: Callable[[], object]) -> None:
            self.jobs += 1
            threading.Thread(target=job, daemon=True).start()

        self.core = ControlCore(
            t, self._send, home=self.home, runner=runner, server_version="test", calls=self.calls
        )
        self.reg.register("control", FnService(self._origin))
        for cl in self.clients.values():
            cl.core = self.core

    def _origin(self, r: Request) -> None:
        """Lanes' pushes to control: ``origin.event``, or several at once as ``origin.events``."""
        if isinstance(r.body, lanes_msg.StreamEvents):
            self.core.on_origin_events(r.body.events)
        else:
            self.core.on_origin_event(r.body)  # type: ignore[arg-type]

    def _send(self, conn_id: str, env: Envelope) -> None:
        env = Envelope.model_validate(catalog.dump(env.model_dump(by_alias=True)))
        self.clients[conn_id].push(env)

    def client(self, conn_id: str, **handshake: Any) -> Client:
        cl = self.clients[conn_id] = Client(self.core, conn_id)
        reply = cl.request(
            c.HANDSHAKE,
            {
                "protocol_version": c.CONTROL_PROTOCOL,
                "features": list(c.FEATURES),
                "cwd": str(self.home.root),
                **handshake,
            },
        )
        assert reply.kind == "ok", reply.body
        cl.session_id = reply.body["session_id"]  # type: ignore[attr-defined]
        return cl

    def close(self) -> None:
        self.engine.close()
