"""The ``messengers`` child: one pykka actor per enabled messenger platform, each owning a thread that runs
the platform's poller (``geode.messengers.poller``) on its own asyncio loop, restarted in-process with
jittered backoff when it fails.

Serves ``messenger.send`` and ``messenger.send_file`` (``actors.tree.messenger_uploads``; posts only to bound
chats; one idempotency key is posted at most once in this process's lifetime), ``messenger.bindings``,
``origin.event`` (turn streams from lanes, also as a lanes peer so the stream stays in order and lanes re-asks
pending approvals when we reappear) and ``runtime.*``. A platform without a token is ``disabled`` with the
reason; the child serves anyway. The platforms themselves (translators, pollers, bus ports, the per-platform
actor) are built in ``actors.tree.messenger_platforms``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pykka

from actors.bus import Bus
from actors.tree.messenger_platforms import ActorLedger, PlatformActor, make_translator, wire_pollers
from actors.tree.messenger_uploads import post_once, send_file_once
from actors.tree.peer_exits import on_exit_failer
from geode.config_reload import MESSENGERS, ConfigChange
from geode.lanes.stream import each_event
from geode.messengers.bindings import Bindings
from geode.messengers.config import PLATFORMS, MessengerBinding, MessengersSection
from geode.messengers.poller import Poller
from geode.messengers.ports import Translator
from geode.messengers.runner import PollerRunner
from geode.messengers.schedule import PollerStatus
from geode.messengers.sessions import session_id_for
from geode.protocol import lanes as lanes_msg
from geode.protocol import messengers as messengers_msg
from geode.protocol import runtime
from geode.protocol.dispatch import Dispatch
from geode.protocol.errors import GeodeError
from geode.protocol.transport import Request

if TYPE_CHECKING:
    from actors.tree.config_sections import TreeSettings
    from actors.tree.registry import ChildContext

log = logging.getLogger(__name__)
SEND_TIMEOUT_S = 55.0  # below the executor's 60 s wait, so a slow post answers "timeout" to it first
QUIET_S = SEND_TIMEOUT_S  # a reload's restart waits this long at most for the posts under way


@dataclass
class MessengersChild:
    """The child's state: the enabled platforms' actors and why the others are disabled."""

    name: str
    incarnation: int
    section: MessengersSection
    bindings: Bindings
    actors: dict[str, pykka.ActorRef[PlatformActor]] = field(default_factory=dict)
    runners: dict[str, PollerRunner] = field(default_factory=dict)
    pollers: dict[str, Poller] = field(default_factory=dict)
    disabled: dict[str, str] = field(default_factory=dict)
    bus: Bus | None = None
    started: float = field(default_factory=time.monotonic)
    deaths: list[runtime.ChildDied] = field(default_factory=list)
    sending: int = 0  # messenger.send calls posting now (a reload's restart waits for none)
    idle: threading.Condition = field(default_factory=threading.Condition)

    def dispatch(self) -> Dispatch:
        return Dispatch(
            self.name,
            {
                runtime.PING: lambda b, r: runtime.Pong(
                    name=self.name, incarnation=self.incarnation, pid=os.getpid()
                ),
                runtime.STATUS: self._status,
                runtime.CHILD_DIED: self._child_died,
                messengers_msg.SEND: self._send,
                messengers_msg.SEND_FILE: self._send_file,
                messengers_msg.BINDINGS: self._bindings,
                lanes_msg.ORIGIN_EVENT: self._origin_event,
                lanes_msg.ORIGIN_EVENTS: each_event(self._origin_event),
            },
        )

    # --- status -------------------------------------------------------------------------------------
    def platforms(self) -> list[dict[str, Any]]:
        views = [p.status.view() for p in self.pollers.values()]
        for platform, reason in self.disabled.items():
            views.append(PollerStatus(platform, state="disabled", reason=reason).view())
        return views

    def _status(self, b: runtime.StatusQuery, r: Request) -> runtime.StatusReply:
        detail = {"platforms": self.platforms(), "uptime_s": round(time.monotonic() - self.started, 3)}
        return runtime.StatusReply(
            name=self.name, incarnation=self.incarnation, pid=os.getpid(), detail=detail
        )

    def _child_died(self, b: runtime.ChildDied, r: Request) -> runtime.Ack:
        self.deaths.append(b)
        return runtime.Ack()

    def _origin_event(self, b: lanes_msg.StreamEvent, r: Request) -> None:
        for poller in self.pollers.values():
            poller.on_event(b)

    def _bindings(self, b: messengers_msg.BindingsQuery, r: Request) -> messengers_msg.BindingsReply:
        views = [self._binding_view(x) for x in self.bindings]
        return messengers_msg.BindingsReply(bindings=views, platforms=self.platforms())

    def _binding_view(self, x: MessengerBinding) -> messengers_msg.BindingView:
        view = messengers_msg.BindingView(
            platform=x.platform,
            channel_id=x.channel_id,
            require_mention=x.require_mention,
            allowed_senders=list(x.allowed_senders),
        )
        poller = self.pollers.get(x.platform)
        state = poller.out.state if poller is not None else None
        if poller is None or state is None:
            return view
        try:
            view.session_id = session_id_for(
                x.platform, x.channel_id, state.generation(x.channel_id), poller.settings.session_key
            )
            last = state.last_turn(x.channel_id)
            rec = state.store.get_turn(last) if last else None
        except GeodeError as exc:
            log.info("bindings view: %s", exc)
            return view
        if rec is not None:
            view.last_turn = {
                "turn_id": rec.turn_id,
                "state": rec.state.value,
                "termination_reason": (rec.outcome or {}).get("termination_reason", ""),
                "updated_at": rec.updated_at,
            }
        return view

    # --- messenger.send -----------------------------------------------------------------------------
    def _send(self, b: messengers_msg.SendMessage, r: Request) -> messengers_msg.MessageSent:
        with self.idle:
            self.sending += 1
        try:
            return self._send_once(b)
        finally:
            with self.idle:
                self.sending -= 1
                self.idle.notify_all()

    def _send_file(self, b: messengers_msg.SendFile, r: Request) -> messengers_msg.MessageSent:
        with self.idle:
            self.sending += 1
        try:
            return send_file_once(self, b)
        finally:
            with self.idle:
                self.sending -= 1
                self.idle.notify_all()

    def _send_once(self, b: messengers_msg.SendMessage) -> messengers_msg.MessageSent:
        return post_once(
            self,
            b.channel,
            b.idempotency_key,
            lambda poller, key: poller.post(key, b.text, b.reply_to),
            "messengers.after_post",
        )


@dataclass
class MessengersProcess:
    child: MessengersChild
    bus: Bus

    def start(self) -> None:
        """Start each platform's actor (its poller thread); call once the endpoint is served."""
        for platform, runner in self.child.runners.items():
            self.child.actors[platform] = PlatformActor.start(runner)
            self.child.pollers[platform].progress.ledger = ActorLedger(self.child.actors[platform])
        with self.child.idle:  # a send that came while they started goes on
            self.child.idle.notify_all()

    def apply_config(self, change: ConfigChange, settings: TreeSettings) -> list[str] | None:
        """`geode reload`: new bindings, platforms or tokens → this child's clean restart through the
        supervisor (the new incarnation starts on the new copy; receipts keep every reply at most once)."""
        if MESSENGERS not in change.areas:
            return []
        with self.child.idle:  # no post cut in half (its receipt would turn uncertain): wait for none
            self.child.idle.wait_for(lambda: self.child.sending == 0, QUIET_S)
        return None

    def stop(self) -> None:
        for ref in self.child.actors.values():
            try:
                ref.stop(block=True, timeout=5.0)
            except (pykka.ActorDeadError, pykka.Timeout):
                pass


def start_messengers(bus: Bus, ctx: ChildContext) -> MessengersProcess:
    section = ctx.settings.messengers
    child = MessengersChild(ctx.name, ctx.incarnation, section, Bindings(section.bindings), bus=bus)
    dotenv = ctx.source.env  # .env as read at the child's start (or its last reload)
    translators: dict[str, Translator] = {}
    for name in PLATFORMS:
        made = make_translator(name, section, environ=os.environ, dotenv=dotenv)
        if isinstance(made, str):
            child.disabled[name] = made
        else:
            translators[name] = made
    child.pollers, child.runners = wire_pollers(bus, ctx, section, child.bindings, translators)
    for platform, why in child.disabled.items():
        log.info("%s: disabled (%s)", platform, why)
    return MessengersProcess(child, bus)


def build(bus: Bus, ctx: ChildContext) -> MessengersProcess:
    """Registry builder (``actors.tree.registry``): serve ``messengers``, then start the pollers."""
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per long poll is noise
    proc = start_messengers(bus, ctx)
    # the executor exited: its messenger.deliver calls in flight get no reply; fail them now, so the pollers'
    # recovery asks the next executor (which finds those receipts uncertain) instead of waiting out 90 s
    bus.subscribe("supervisor", on_exit_failer(bus, ("executor",), ctx.name))
    dispatch = proc.child.dispatch()
    bus.serve(ctx.name, dispatch)
    on_event = proc.child._origin_event
    stream = Dispatch(
        f"{ctx.name} (lanes peer)",
        {lanes_msg.ORIGIN_EVENT: on_event, lanes_msg.ORIGIN_EVENTS: each_event(on_event)},
    )
    bus.connect_peer("lanes", stream, concurrency=1)  # one handler: each turn's stream stays in order
    proc.start()
    return proc
