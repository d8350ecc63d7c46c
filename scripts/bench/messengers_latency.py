"""Chat bot latency (issue 31): message → first progress and message → final answer, per platform (Telegram,
Slack, Discord), through the real tree (`geode serve`, its messengers child on python-telegram-bot, slack_sdk
Socket Mode and discord.py) against the local servers of geode/testing/, beside a bare SDK echo bot on the
same local server in the same run (the baseline: the same SDK, replying the message's text, nothing else).

The servers run in this process; every time is on its monotonic clock: a message's time is just before the
test API queues it, an answer's is the server's arrival stamp of the bot's post (``calls(...)["at"]``), so the
poll that notices it adds nothing. Messages go one at a time (the answer waited for before the next): this
is latency, not throughput. The model is the scripted provider answering ``pong <token>`` after ``--model-s``
(0.1 s); a turn is one model call, no tools. GEODE's first progress is its status message for the turn (posted
once the turn has run ``progress_after_s``, set to ``--progress-after``; the first visible sign the bot is
on it — with a 0.1 s model the turn ends before any edit is due); a tree without live progress prints "-".

Phase 1: the echo bots, one platform at a time, each in its own process. Phase 2: one tree with the three
platforms bound (a warm-up message each, not counted), the same messages. Then p50/p99 per platform and the
ratio to the echo bot.

Run: .venv/bin/python scripts/bench/messengers_latency.py [--messages 30] [--quick] [--model-s 0.1]
``--quick``: 5 messages per platform. Not part of scripts/test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from geode.testing.bot_api_server import LocalBotApi  # noqa: E402
from geode.testing.discord_server import CHANNELS, LocalDiscord  # noqa: E402
from geode.testing.scenario import ScriptedReply  # noqa: E402
from geode.testing.scripted import ScriptedServer  # noqa: E402
from geode.testing.slack_server import DEFAULT_USER, LocalSlack  # noqa: E402

TG_CHAT, TG_USER = -1009001, 1001
SLACK_CHANNEL = "C0BENCH001"
DC_CHANNEL = CHANNELS[0]
PLATFORMS = ("telegram", "slack", "discord")
TOKEN = re.compile(r"tok\d+[a-z]+")  # letters and digits: nothing a Markdown escape changes


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def wait(pred: Callable[[], Any], timeout_s: float, what: str) -> Any:
    end = time.monotonic() + timeout_s
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > end:
            raise SystemExit(f"bench failed: timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(0.002)


class Servers:
    """The three local servers and, per platform, how to send a message and find the bot's posts."""

    def __init__(self) -> None:
        self.tg = LocalBotApi().start()
        self.slack = LocalSlack(redeliver_after_s=30).start()
        self.dc = LocalDiscord().start()

    def stop(self) -> None:
        for s in (self.tg, self.slack, self.dc):
            s.stop()

    def send(self, platform: str, text: str) -> float:
        t0 = time.monotonic()
        if platform == "telegram":
            self.tg.push_message(TG_CHAT, text, sender_id=TG_USER)
        elif platform == "slack":
            self.slack.push_message(SLACK_CHANNEL, text)
        else:
            self.dc.push_message(DC_CHANNEL, text)
        return t0

    def posts(self, platform: str) -> list[tuple[float, str]]:
        """(server arrival time, text) of each post the bot made, in order."""
        if platform == "telegram":
            return [(c["at"], str(c["params"].get("text", ""))) for c in self.tg.calls("sendMessage")]
        if platform == "slack":
            return [(c["at"], str(c["params"].get("text", ""))) for c in self.slack.calls("chat.postMessage")]
        return [(c["at"], str((c["json"] or {}).get("content", ""))) for c in self.dc.calls("send_message")]


def measure(
    servers: Servers, platform: str, n: int, answer_of: Callable[[str], str], *, tag: str
) -> tuple[list[float], list[float]]:
    """``n`` messages, one at a time: (message → final answer, message → first other post before it)."""
    finals, firsts = [], []
    for i in range(n):
        token = f"tok{i}{tag}"
        seen = len(servers.posts(platform))
        want = answer_of(token)

        def answered(seen: int = seen, want: str = want) -> list[tuple[float, str]] | None:
            new = servers.posts(platform)[seen:]
            return new if any(want in text for _, text in new) else None

        t0 = servers.send(platform, f"ping {token}")
        new = wait(answered, 30, f"{platform}'s answer to {token}")
        final_at = next(at for at, text in new if want in text)
        finals.append(final_at - t0)
        before = [at for at, text in new if want not in text and at <= final_at]
        if before:
            firsts.append(min(before) - t0)
        time.sleep(0.05)  # the turn's tail (a status message deleted, the receipt) settles
    return finals, firsts


# -- the baseline: bare SDK echo bots (each run as its own process: --echo PLATFORM URL...) -----------------
async def echo_telegram(base_url: str, token: str) -> None:
    from telegram import Bot

    async with Bot(token, base_url=base_url) as bot:
        offset = None
        while True:
            for update in await bot.get_updates(offset=offset, timeout=10):
                offset = update.update_id + 1
                msg = update.message
                if msg is not None and msg.text:
                    await bot.send_message(msg.chat_id, msg.text)


async def echo_slack(api_url: str, bot_token: str, app_token: str) -> None:
    from slack_sdk.socket_mode.aiohttp import SocketModeClient
    from slack_sdk.socket_mode.request import SocketModeRequest
    from slack_sdk.socket_mode.response import SocketModeResponse
    from slack_sdk.web.async_client import AsyncWebClient

    web = AsyncWebClient(token=bot_token, base_url=api_url)
    client = SocketModeClient(app_token, web_client=AsyncWebClient(base_url=api_url))

    async def on_request(c: SocketModeClient, req: SocketModeRequest) -> None:
        await c.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
        event = req.payload.get("event") or {}
        if event.get("type") == "message" and not event.get("bot_id") and not event.get("subtype"):
            await web.chat_postMessage(channel=event["channel"], text=event["text"], thread_ts=event["ts"])

    client.socket_mode_request_listeners.append(on_request)  # type: ignore[arg-type]
    await client.connect()
    await asyncio.Event().wait()


async def echo_discord(api_base: str, gateway_url: str, token: str) -> None:
    import discord

    from geode.messengers.discord import point_at

    point_at(api_base, gateway_url)  # discord.py's REST base and gateway, as GEODE's translator sets them
    intents = discord.Intents.default()
    intents.message_content = True
    client = discord.Client(intents=intents)

    @client.event
    async def on_message(message: discord.Message) -> None:
        if not message.author.bot and message.content:
            await message.channel.send(message.content)

    await client.start(token)


def echo_main(argv: list[str]) -> None:
    platform, *args = argv
    bots: dict[str, Callable[..., Any]] = {
        "telegram": echo_telegram, "slack": echo_slack, "discord": echo_discord,
    }  # fmt: skip
    asyncio.run(bots[platform](*args))


def echo_argv(servers: Servers, platform: str) -> list[str]:
    if platform == "telegram":
        return [servers.tg.base_url, servers.tg.token]
    if platform == "slack":
        return [servers.slack.api_url, servers.slack.bot_token, servers.slack.app_token]
    return [servers.dc.api_base, servers.dc.gateway_url, servers.dc.token]


def connected(servers: Servers, platform: str) -> Callable[[], bool]:
    """Whether a bot (started after this call) is there to receive a message now."""
    identified, links = servers.dc.identify_count(), servers.slack.connections()
    if platform == "telegram":
        return lambda: servers.tg.polling
    if platform == "slack":
        return lambda: servers.slack.connections() > links
    return lambda: servers.dc.identify_count() > identified and servers.dc.connected()


def baseline(servers: Servers, platform: str, n: int) -> list[float]:
    ready = connected(servers, platform)
    bot = subprocess.Popen(
        [sys.executable, __file__, "--echo", platform, *echo_argv(servers, platform)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait(ready, 60, f"the {platform} echo bot connected")
        measure(servers, platform, 2, lambda tok: tok, tag=f"echowarm{platform}")
        finals, _ = measure(servers, platform, n, lambda tok: tok, tag=f"echo{platform}")
        if platform == "telegram":  # its next long poll confirms the last update: GEODE starts after it
            wait(lambda: servers.tg.polling, 10, "the echo bot's next long poll")
    finally:
        bot.terminate()
        bot.wait(10)
    return finals


# -- GEODE: one tree, three platforms --------------------------------------------------------------------
def model_reply(model_s: float) -> Callable[[Any], ScriptedReply]:
    def reply(req: Any) -> ScriptedReply:
        messages = req.body.get("messages", []) if isinstance(req.body, dict) else []
        last = str(messages[-1] if messages else "")
        found = TOKEN.findall(last)
        return ScriptedReply(text=f"pong {found[-1] if found else '?'}", delay_s=model_s)

    return reply


def geode_config(servers: Servers, model_url: str, progress_after: float) -> str:
    from tests.actors.tree_kit import FAST_CONFIG
    from tests.messengers.platform_tree_kit import platform_sections

    progress = f"progress_after_s = {progress_after}\nprogress_every_s = 0.1\n" if progress_after else ""
    return (
        FAST_CONFIG
        + f'[providers]\nmodel = "claude-sonnet-5"\n[providers.anthropic]\nbase_url = "{model_url}"\n'
        + f"[messengers]\n{progress}"
        + platform_sections(servers.tg, servers.slack, servers.dc)
        + f'[[messengers.bindings]]\nplatform = "telegram"\nchannel_id = "{TG_CHAT}"\n'
        + f'allowed_senders = ["{TG_USER}"]\n'
        + f'[[messengers.bindings]]\nplatform = "slack"\nchannel_id = "{SLACK_CHANNEL}"\n'
        + f'allowed_senders = ["{DEFAULT_USER}"]\n'
        + f'[[messengers.bindings]]\nplatform = "discord"\nchannel_id = "{DC_CHANNEL}"\n'
    )


def progress_supported() -> bool:
    from geode.messengers.config import MessengersSection

    return "progress_after_s" in MessengersSection.model_fields


def run_geode(
    servers: Servers, n: int, model_s: float, progress_after: float
) -> dict[str, tuple[list[float], list[float]]]:
    from geode.home import GeodeHome
    from tests.actors.tree_kit import serve, stop
    from tests.messengers.platform_tree_kit import write_tokens

    model = ScriptedServer(model_reply(model_s)).start()
    out = {}
    with tempfile.TemporaryDirectory(prefix="geode-bench-msg-") as tmp:
        home = GeodeHome(Path(tmp) / "gh").ensure()
        home.config_file.write_text(geode_config(servers, model.base_url, progress_after))
        home.env_file.write_text("ANTHROPIC_API_KEY=sk-bench\n")
        write_tokens(home, servers.tg, servers.slack, servers.dc)
        try:
            ready = [connected(servers, p) for p in PLATFORMS]
            serve(home)
            wait(lambda: all(r() for r in ready), 60, "GEODE's three bots connected")
            for platform in PLATFORMS:
                measure(servers, platform, 1, lambda tok: f"pong {tok}", tag=f"warm{platform}")
                out[platform] = measure(servers, platform, n, lambda tok: f"pong {tok}", tag=platform)
        finally:
            stop(home)
            model.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=30)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--model-s", type=float, default=0.1)
    parser.add_argument("--progress-after", type=float, default=0.02)
    args = parser.parse_args()
    n = 5 if args.quick else args.messages
    progress_after = args.progress_after if progress_supported() else 0.0
    os.environ.setdefault("GEODE_LOG_LEVEL", "WARNING")
    servers = Servers()
    try:
        echo = {p: baseline(servers, p, n) for p in PLATFORMS}
        geode = run_geode(servers, n, args.model_s, progress_after)
    finally:
        servers.stop()
    print(f"\n{n} messages per platform, one at a time; model {args.model_s * 1000:.0f} ms; "
          f"progress_after_s {progress_after or 'unset (no live progress in this tree)'}")  # fmt: skip
    print(f"{'platform':<9} {'echo bot p50/p99':>17} {'GEODE answer p50/p99':>21} {'ratio p50':>9} "
          f"{'minus model p50':>15} {'GEODE 1st progress p50/p99':>27}")  # fmt: skip
    for p in PLATFORMS:
        finals, firsts = geode[p]
        e50, e99, g50, g99 = (1000 * x for x in (pct(echo[p], 0.5), pct(echo[p], 0.99),
                                                  pct(finals, 0.5), pct(finals, 0.99)))  # fmt: skip
        prog = "-"
        if firsts:
            prog = f"{1000 * pct(firsts, 0.5):.0f}/{1000 * pct(firsts, 0.99):.0f} ms ({len(firsts)}/{n})"
        bare = g50 - 1000 * args.model_s
        print(f"{p:<9} {e50:>11.0f}/{e99:<3.0f} ms {g50:>14.0f}/{g99:<3.0f} ms {g50 / e50:>9.1f} "
              f"{bare:>12.0f} ms {prog:>27}")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--echo":
        echo_main(sys.argv[2:])
    else:
        main()
