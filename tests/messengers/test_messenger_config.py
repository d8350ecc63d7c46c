"""``[messengers]``: typed, documented, refused at start-up with the key named; tokens from the environment
or ``$GEODE_HOME/.env`` and never readable in a log line."""

from __future__ import annotations

import io
import logging
import tomllib
from pathlib import Path
from typing import Any

import pytest

from actors.tree.config_sections import SCHEMAS, start_settings
from geode.config_check import ConfigReport, check_config
from geode.config_schema import GeodeConfig
from geode.home import GeodeHome
from geode.messengers.config import MessengersSection, TelegramSettings, platform_token
from geode.protocol.errors import ConfigError
from geode.redaction import redact, redact_text
from tests.config.config_kit import SHIPPED

TG_TOKEN = "1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw-"


def _check(cfg: dict[str, Any]) -> ConfigReport:
    return check_config(ConfigReport(Path("/h/config.toml"), cfg), schemas=SCHEMAS)


def _bindings(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"messengers": {"bindings": list(entries)}}


SECOND_BAD = _bindings(
    {"platform": "slack", "channel_id": "C01"}, {"platform": "telegram", "channel_id": "y"}
)


def _tg(channel_id: Any = "1", **kw: Any) -> dict[str, Any]:
    """A config with one Telegram binding."""
    return _bindings({"platform": "telegram", "channel_id": channel_id, **kw})


def test_the_defaults() -> None:
    m = GeodeConfig.from_raw({}).messengers
    assert m == MessengersSection() and m.bindings == [] and m.approval_timeout_s == 120.0
    assert m.telegram == TelegramSettings(base_url="https://api.telegram.org/bot", poll_timeout_s=25.0)
    assert m.telegram.enabled


def test_a_config_file_reaches_the_typed_section(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "gh").ensure()
    home.config_file.write_text(
        "[messengers]\napproval_timeout_s = 60\n"
        '[messengers.telegram]\nbase_url = "http://127.0.0.1:8081/bot"\npoll_timeout_s = 0\n'
        '[[messengers.bindings]]\nplatform = "telegram"\nchannel_id = -1001234567890\n'
        "allowed_senders = [501, 502]\nrequire_mention = true\n"
        '[[messengers.bindings]]\nplatform = "telegram"\nchannel_id = "-1001234567890:05"\n'
        'allowed_tools = ["read_file"]\ntime_budget_s = 30\n'
        '[[messengers.bindings]]\nplatform = "slack"\nchannel_id = "C0123ABCD:1712345678.123456"\n'
        '[[messengers.bindings]]\nplatform = "discord"\nchannel_id = "1086469962663685248"\n'
    )
    err = io.StringIO()
    settings, report = start_settings(home, prog="geode serve", err=err)
    assert settings is not None and report.ok and err.getvalue() == ""
    m = settings.messengers
    assert (m.approval_timeout_s, m.telegram.base_url, m.telegram.poll_timeout_s) == (
        60.0,
        "http://127.0.0.1:8081/bot",
        0.0,
    )
    group, topic, slack, discord = m.bindings
    assert group.channel_id == "-1001234567890"
    assert group.allowed_senders == ["501", "502"]  # TOML integers are read as ids
    assert group.require_mention and group.allowed_tools is None and group.time_budget_s == 120.0
    assert (topic.channel_id, topic.chat_id, topic.thread_id) == ("-1001234567890:5", "-1001234567890", "5")
    assert topic.allowed_tools == ["read_file"] and topic.time_budget_s == 30.0
    assert slack.thread_id == "1712345678.123456" and discord.platform == "discord"
    assert [b.channel_id for b in m.for_platform("telegram")] == ["-1001234567890", "-1001234567890:5"]


def test_the_documented_example_binding_is_valid() -> None:
    """The ``##`` example entry of config/geode.toml, uncommented, is a binding the schema accepts."""
    lines = SHIPPED.read_text().splitlines()
    start = lines.index("## [[messengers.bindings]]")
    example = []
    for line in lines[start:]:
        if not line.startswith("## "):
            break
        example.append(line[3:])
    raw = tomllib.loads("\n".join(example))
    (binding,) = GeodeConfig.from_raw({"messengers": raw["messengers"]}).messengers.bindings
    assert binding.platform == "telegram" and binding.channel_id == "-1001234567890"
    assert set(binding.model_fields_set) == set(type(binding).model_fields)  # every key is shown


@pytest.mark.parametrize(
    ("cfg", "needle"),
    [
        (_bindings({"platform": "whatsapp", "channel_id": "1"}), "[messengers] bindings[0].platform"),
        (_bindings({"channel_id": "1"}), "[messengers] bindings[0].platform"),
        (_bindings({"platform": "telegram"}), "[messengers] bindings[0].channel_id"),
        (_bindings({"platform": "telegram", "channel_id": "@mychannel"}), "bindings[0].channel_id"),
        (_bindings({"platform": "telegram", "channel_id": "-100:"}), "bindings[0].channel_id"),
        (_bindings({"platform": "telegram", "channel_id": "-100:topic"}), "bindings[0].channel_id"),
        (_bindings({"platform": "telegram", "channel_id": "-100:0"}), "bindings[0].channel_id"),
        (_bindings({"platform": "telegram", "channel_id": ""}), "bindings[0].channel_id"),
        (_bindings({"platform": "slack", "channel_id": "#general"}), "bindings[0].channel_id"),
        (_bindings({"platform": "slack", "channel_id": "C0123:not-a-ts"}), "bindings[0].channel_id"),
        (_bindings({"platform": "discord", "channel_id": "general"}), "bindings[0].channel_id"),
        (SECOND_BAD, "[messengers] bindings[1].channel_id"),
        (_tg(time_budget_s=0), "bindings[0].time_budget_s"),
        (_tg(time_budget_s=1e6), "bindings[0].time_budget_s"),
        (_tg(allowed_senders="501"), "allowed_senders"),
        (_tg(allowed_senders=[""]), "allowed_senders"),
        (_tg(allowed_tools=["rm -rf"]), "allowed_tools"),
        (_tg(require_mention="yes"), "require_mention"),
        # a misspelt key must not silently open the chat to everyone
        (_tg(allowed_sender=["5"]), "allowed_sender"),
        ({"messengers": {"telegram": {"poll_timeout_s": 51}}}, "[messengers] telegram.poll_timeout_s"),
        ({"messengers": {"telegram": {"poll_timeout_s": -1}}}, "[messengers] telegram.poll_timeout_s"),
        ({"messengers": {"telegram": {"base_url": "api.telegram.org"}}}, "[messengers] telegram.base_url"),
        ({"messengers": {"approval_timeout_s": 0}}, "[messengers] approval_timeout_s"),
        ({"messengers": {"bindings": {"platform": "telegram"}}}, "[messengers] bindings"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_key(cfg: dict[str, Any], needle: str) -> None:
    errors = _check(cfg).errors
    assert len(errors) == 1, errors
    assert needle in errors[0] and errors[0].startswith("/h/config.toml: ")
    with pytest.raises(ConfigError) as refused:  # the typed config (every child builds it) refuses it too
        GeodeConfig.from_raw(cfg)
    assert needle in refused.value.message


@pytest.mark.parametrize(
    ("first", "second"),
    [("-1001234567890", "-1001234567890"), ("-100123", -100123), ("-100123:5", "-100123:05"), ("7", "007")],
)
def test_two_bindings_of_one_chat_are_refused(first: Any, second: Any) -> None:
    a, b = _tg(first), _tg(second)
    cfg = _bindings(*a["messengers"]["bindings"], *b["messengers"]["bindings"])
    (line,) = _check(cfg).errors
    assert "[messengers] bindings:" in line and "bindings[0] and bindings[1]" in line


def test_the_same_id_on_two_platforms_or_a_chat_and_its_topic_are_not_duplicates() -> None:
    cfg = _bindings(
        {"platform": "telegram", "channel_id": "123"},
        {"platform": "discord", "channel_id": "123"},
        {"platform": "telegram", "channel_id": "123:4"},
    )
    assert _check(cfg).errors == []


def test_a_bad_binding_refuses_the_start(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "gh").ensure()
    home.config_file.write_text('[[messengers.bindings]]\nplatform = "telegram"\nchannel_id = "general"\n')
    err = io.StringIO()
    settings, report = start_settings(home, prog="geode serve", err=err)
    assert settings is None and not report.ok
    first = err.getvalue().splitlines()[0]
    assert "[messengers] bindings[0].channel_id" in first and "'general'" in first
    assert "refusing to start" in err.getvalue()


# --- tokens -------------------------------------------------------------------------------------------


def test_the_environment_wins_over_the_dotenv() -> None:
    env, dotenv = {"TELEGRAM_BOT_TOKEN": "env-token"}, {"TELEGRAM_BOT_TOKEN": "file-token"}
    assert platform_token("telegram", environ=env, dotenv=dotenv) == "env-token"
    assert platform_token("telegram", environ={}, dotenv=dotenv) == "file-token"
    assert platform_token("telegram", environ={"TELEGRAM_BOT_TOKEN": "  "}, dotenv=dotenv) == "file-token"
    assert platform_token("telegram", environ={}, dotenv={}) is None
    assert platform_token("telegram", environ={"SLACK_BOT_TOKEN": "xoxb-1"}, dotenv={}) is None


def test_later_platforms_read_their_own_variables() -> None:
    env = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "DISCORD_BOT_TOKEN": "d"}
    assert platform_token("slack", environ=env, dotenv={}) == "xoxb-1"
    assert platform_token("slack", environ=env, dotenv={}, name="SLACK_APP_TOKEN") == "xapp-1"
    assert platform_token("discord", environ=env, dotenv={}) == "d"
    with pytest.raises(KeyError):
        platform_token("telegram", environ=env, dotenv={}, name="SLACK_APP_TOKEN")


def test_the_token_from_geode_home_dotenv(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "gh").ensure()
    home.env_file.write_text(f'# bots\nexport TELEGRAM_BOT_TOKEN="{TG_TOKEN}"\n')
    assert platform_token("telegram", environ={}, dotenv=home.load_dotenv()) == TG_TOKEN


@pytest.mark.parametrize(
    "secret",
    [
        TG_TOKEN,
        "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp",
        "xapp-1-A0123ABCD-1234567890-abcdef0123456789",
        "xoxe-1-My0xLTEyMzQ1Njc4OTA",
        "MTA4NjQ2OTk2MjY2MzY4NTI0OA.GZ8aBc.abcdefghijklmnopqrstuvwxyz0123456789AB",
    ],
)
def test_bot_tokens_are_masked_in_text(secret: str) -> None:
    assert secret not in redact_text(f"token {secret} end")
    assert secret not in str(redact({"detail": f"failed with {secret}"}))


def test_a_telegram_token_inside_a_bot_api_url_is_masked() -> None:
    """httpx logs every request URL at INFO, and the Bot API puts the token in the path."""
    line = f'HTTP Request: POST https://api.telegram.org/bot{TG_TOKEN}/getUpdates "HTTP/1.1 200 OK"'
    out = redact_text(line)
    assert TG_TOKEN.split(":")[1][:20] not in out
    assert out.startswith("HTTP Request: POST https://api.telegram.org/bot[REDACTED]/getUpdates")
    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, "HTTP Request: %s", (line,), None)
    assert TG_TOKEN not in redact_text(record.getMessage())


def test_chat_ids_and_times_are_not_mistaken_for_tokens() -> None:
    text = "2026-12-03 10:20:39,123 chat -1001234567890:42 message 12345 update 987654321"
    assert redact_text(text) == text
