"""What the messenger tree tests share to start a `geode serve` against the local Telegram, Slack and Discord
servers: the ``[messengers.<platform>]`` sections pointing at them, their tokens in ``.env``, and the served
tree (the Discord bot waited for on the gateway), stopped afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from geode.home import GeodeHome
from tests.actors.tree_kit import serve, stop
from tests.waiting import poll_for


def platform_sections(tg: Any = None, slack: Any = None, dc: Any = None) -> str:
    """The config sections of the local servers given (``LocalBotApi``, ``LocalSlack``, ``LocalDiscord``)."""
    out = ""
    if tg is not None:
        out += f'[messengers.telegram]\nbase_url = "{tg.base_url}"\npoll_timeout_s = 1\n'
    if slack is not None:
        out += f'[messengers.slack]\nbase_url = "{slack.api_url}"\npoll_timeout_s = 1\n'
    if dc is not None:
        out += (
            f'[messengers.discord]\nbase_url = "{dc.api_base}"\ngateway_url = "{dc.gateway_url}"\n'
            "poll_timeout_s = 1\n"
        )
    return out


def write_tokens(home: GeodeHome, tg: Any = None, slack: Any = None, dc: Any = None) -> None:
    """The bot tokens of the local servers given, appended to the home's ``.env``."""
    lines = []
    if tg is not None:
        lines.append(f"TELEGRAM_BOT_TOKEN={tg.token}")
    if slack is not None:
        lines += [f"SLACK_BOT_TOKEN={slack.bot_token}", f"SLACK_APP_TOKEN={slack.app_token}"]
    if dc is not None:
        lines.append(f"DISCORD_BOT_TOKEN={dc.token}")
    with home.env_file.open("a") as f:
        f.write("".join(f"{line}\n" for line in lines))


@contextmanager
def serving(
    home: GeodeHome, tg: Any = None, slack: Any = None, dc: Any = None, *, cwd: Path | None = None
) -> Iterator[GeodeHome]:
    """``home`` served with the tokens of the servers given (the Discord bot connected), stopped on exit."""
    write_tokens(home, tg, slack, dc)
    try:
        if cwd is not None:
            serve(home, cwd=cwd)
        else:
            serve(home)
        if dc is not None:
            poll_for(dc.connected, 60, what="the Discord bot on the gateway")
        yield home
    finally:
        stop(home)
