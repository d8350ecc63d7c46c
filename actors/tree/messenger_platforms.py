"""The messengers child's platforms: each enabled platform's translator (its SDK, built from the tokens),
its poller and runner wired to the bus (:func:`wire_pollers`), the bus ports the poller submits turns and asks
for replies through (:class:`BusPorts`), and the pykka actor that owns the runner's thread and the ledger of
idempotency keys posted (:class:`PlatformActor`). The process module is ``actors.messengers``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pykka

from actors.bus import Bus
from geode.home_secrets import session_id_key
from geode.messengers.bindings import Bindings
from geode.messengers.chat_commands import ChatMemory
from geode.messengers.config import TOKEN_VARS, MessengerBinding, MessengersSection, platform_token
from geode.messengers.observe import observing
from geode.messengers.poller import Poller, PollerSettings
from geode.messengers.ports import Translator
from geode.messengers.runner import PollerRunner
from geode.messengers.session_spec import daemon_session_settings
from geode.messengers.transcription import transcriber_for
from geode.messengers.workspaces import chat_workspace
from geode.protocol import lanes as lanes_msg
from geode.protocol import lifecycle
from geode.protocol import messengers as messengers_msg
from geode.protocol.errors import RequestTimeout, Unavailable
from geode.protocol.transport import Transport
from geode.records.store_client import StoreClient
from geode.sessions.factory import SessionSpec, create_session
from geode.tools.catalogue_plans import CataloguePlans

if TYPE_CHECKING:
    from actors.tree.registry import ChildContext

MAX_KEYS = 200_000


class BusPorts:
    """The poller's lanes and executor ports over the bus (the store port is a :class:`StoreClient`)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def submit(self, sub: lanes_msg.Submit) -> lanes_msg.Submitted:
        delay = 0.2
        for attempt in range(4):  # idempotent by turn id: a timeout (lanes restarting) is retried
            try:
                out = self.transport.call(
                    "lanes", lanes_msg.SUBMIT, sub, session=sub.session_id, timeout_s=5.0
                )
                return lanes_msg.Submitted.model_validate(out)
            except (RequestTimeout, Unavailable):
                if attempt == 3:
                    raise
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def approval_reply(self, reply: lanes_msg.ApprovalReply) -> bool:
        out = self.transport.call("lanes", lanes_msg.APPROVAL_REPLY, reply, timeout_s=5.0)
        return bool(lanes_msg.Ok.model_validate(out).ok)

    def deliver(self, req: messengers_msg.DeliverReply) -> messengers_msg.Delivered:
        out = self.transport.call(
            "executor", messengers_msg.DELIVER, req, session=req.session_id, timeout_s=90.0
        )
        return messengers_msg.Delivered.model_validate(out)


class PlatformActor(pykka.ThreadingActor):
    """One platform: owns its poller runner (thread + loop) and the ledger of idempotency keys posted."""

    use_daemon_thread = True

    def __init__(self, runner: PollerRunner) -> None:
        super().__init__()
        self.runner = runner
        self.keys: dict[str, messengers_msg.MessageSent | str] = {}  # key → sent, or "inflight"/"unknown"

    def on_start(self) -> None:
        self.runner.start()

    def on_stop(self) -> None:
        self.runner.stop()

    def reserve(self, key: str) -> messengers_msg.MessageSent | str | None:
        """None: post it now (the key is marked in flight); else what an earlier post of it left."""
        seen = self.keys.get(key)
        if seen is None:
            if len(self.keys) >= MAX_KEYS:
                self.keys.pop(next(iter(self.keys)))
            self.keys[key] = "inflight"
        return seen

    def record(self, key: str, outcome: messengers_msg.MessageSent | str | None) -> None:
        """The post's outcome: sent, "unknown" (may have posted), or None (nothing posted: may try again)."""
        if outcome is None:
            self.keys.pop(key, None)
        else:
            self.keys[key] = outcome


class ActorLedger:
    """A platform actor's ledger as blocking calls (the poller's live progress posts through it)."""

    def __init__(self, ref: pykka.ActorRef[PlatformActor]) -> None:
        self.actor = ref.proxy()

    def reserve(self, key: str) -> messengers_msg.MessageSent | str | None:
        return self.actor.reserve(key).get(timeout=5.0)  # type: ignore[no-any-return]

    def record(self, key: str, outcome: messengers_msg.MessageSent | str | None) -> None:
        self.actor.record(key, outcome).get(timeout=5.0)


def make_translator(
    platform: str, section: MessengersSection, *, environ: Mapping[str, str], dotenv: Mapping[str, str]
) -> Translator | str:
    """The platform's translator, or why the platform is disabled (not enabled, or a token missing). The
    SDKs are imported only for a platform that runs."""
    settings = getattr(section, platform)
    if not settings.enabled:
        return f"enabled = false in [messengers.{platform}]"
    tokens = {
        var: platform_token(platform, environ=environ, dotenv=dotenv, name=var)
        for var in TOKEN_VARS[platform]
    }
    missing = [var for var, value in tokens.items() if value is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        return f"{' and '.join(missing)} {verb} not set (environment or $GEODE_HOME/.env)"
    if platform == "telegram":
        from geode.messengers.telegram import TelegramTranslator

        tg = section.telegram
        return TelegramTranslator(
            tokens["TELEGRAM_BOT_TOKEN"] or "", base_url=tg.base_url, poll_timeout_s=tg.poll_timeout_s
        )
    if platform == "slack":
        from geode.messengers.slack import SlackTranslator

        sl = section.slack
        return SlackTranslator(
            tokens["SLACK_BOT_TOKEN"] or "",
            tokens["SLACK_APP_TOKEN"] or "",
            base_url=sl.base_url,
            poll_timeout_s=sl.poll_timeout_s,
            connect_timeout_s=sl.connect_timeout_s,
            channel_sessions=[b.chat_id for b in section.for_platform("slack") if b.session == "channel"],
        )
    from geode.messengers.discord import DiscordTranslator

    return DiscordTranslator.from_settings(tokens["DISCORD_BOT_TOKEN"] or "", section.discord)


def wire_pollers(
    bus: Bus,
    ctx: ChildContext,
    section: MessengersSection,
    bindings: Bindings,
    translators: dict[str, Translator],
) -> tuple[dict[str, Poller], dict[str, PollerRunner]]:
    """Each enabled platform's poller (sessions composed on the child's config snapshot, files kept under each
    chat's workspace) and its runner with the observation pass as sidecar."""
    pollers: dict[str, Poller] = {}
    runners: dict[str, PollerRunner] = {}
    if not translators:
        return pollers, runners
    plans = CataloguePlans(bus.transport, wait=False, who=ctx.name, cache=False)
    bus.subscribe("supervisor", lifecycle.on_child_events(plans.on_lifecycle))
    plans.prefetch()

    def compose(*args: Any, **kw: Any) -> SessionSpec:  # on the child's snapshot, not the file
        return create_session(*args, config=ctx.source.snapshot, **kw)

    def session_settings(binding: MessengerBinding, session_id: str) -> dict[str, Any]:
        return daemon_session_settings(
            binding,
            home=ctx.home,
            session_id=session_id,
            workspace=chat_workspace(binding, ctx.home),  # each chat its own: file tools rooted there
            plans=plans,
            factory=compose,
        )

    ports = BusPorts(bus.transport)
    src = ctx.source  # voice notes: [messengers] transcription, the openai provider's key and base URL
    transcriber = transcriber_for(section, environ=os.environ, dotenv=src.env, config=src.snapshot)
    key = session_id_key(ctx.home)  # kept in the home: the same chat ids after every restart
    for platform, translator in translators.items():
        poller = Poller(
            PollerSettings(
                platform,
                session_key=key,
                retry_cap_s=section.retry_cap_s,
                progress_after_s=section.progress_after_s,
                progress_every_s=section.progress_every_s,
            ),
            translator,
            bindings,
            StoreClient(bus.transport, attempts=3),
            ports,
            ports,
            session_settings,
        )
        poller.keep_files(ctx.home, section, transcriber)  # files saved under each chat's workspace
        poller.memory = ChatMemory(ctx.home.root, src.snapshot.memory.max_bytes)  # the chats' /memory
        pollers[platform] = poller
        observe = observing(poller, StoreClient(bus.transport, attempts=3), section.observe_grace_s)
        runners[platform] = PollerRunner(poller, sidecar=observe)
    return pollers, runners
