"""What `geode reload` prints and each child applies: the difference of two validated snapshots, per area
(geode/config_reload.py, in-process)."""

from __future__ import annotations

import tomllib

from actors.tree.config_sections import TreeSettings
from geode.config_reload import HOOKS, LOOP, MCP, MESSENGERS, SCHEDULE, diff_config, env_digests

BASE = """
[loop]
max_rounds = 10
workers = 2

[[messengers.bindings]]
platform = "telegram"
channel_id = "100"
"""


def snap(text: str) -> TreeSettings:
    return TreeSettings.from_raw(tomllib.loads(text))


def test_nothing_changed_is_said_and_applies_nothing() -> None:
    change = diff_config(snap(BASE), snap(BASE), {"K": "v"}, {"K": "v"})
    assert change.empty and change.areas == frozenset()
    assert change.lines() == ["nothing changed"]


def test_each_area_is_named_with_what_changed() -> None:
    new = (
        BASE.replace("max_rounds = 10", "max_rounds = 5")
        + """
[[messengers.bindings]]
platform = "telegram"
channel_id = "200"

[[hooks.PreToolUse]]
command = "exit 2"

[mcp.servers.docs]
command = "docs-server"
"""
    )
    change = diff_config(snap(BASE), snap(new))
    assert change.areas == {MESSENGERS, HOOKS, MCP, LOOP}
    assert change.lines() == [
        "messengers: restarted (telegram binding added)",
        "executor: hooks reloaded (PreToolUse 0 → 1; next tool call); MCP servers: +docs (next turn)",
        "loop: max_rounds 10 → 5 (next turn)",
    ]


def test_what_no_child_can_take_needs_serve_without_showing_values() -> None:
    new = (
        BASE.replace("workers = 2", "workers = 3")
        + """
[bus]
listen = "tcp://0.0.0.0:7700"

[bus.curve]
secret_key = "very-secret-key-value"
"""
    )
    change = diff_config(snap(BASE), snap(new))
    assert change.areas == frozenset()
    (line,) = change.lines()
    assert line.startswith("needs `geode serve` again: ")
    for key in ("[loop] workers", "[bus] listen", "[bus] curve.secret_key"):
        assert key in line
    assert "very-secret" not in line and "7700" not in line


def test_a_messenger_token_in_env_restarts_messengers_and_other_keys_reach_the_next_turn() -> None:
    old = env_digests({"TELEGRAM_BOT_TOKEN": "123:abc", "OPENAI_API_KEY": "sk-1"})
    new = env_digests({"TELEGRAM_BOT_TOKEN": "123:xyz", "OPENAI_API_KEY": "sk-2", "NEW_KEY": "x"})
    change = diff_config(snap(BASE), snap(BASE), old, new)
    assert change.areas == {MESSENGERS}
    lines = change.lines()
    assert lines == [
        "messengers: restarted (TELEGRAM_BOT_TOKEN changed)",
        ".env: NEW_KEY, OPENAI_API_KEY changed (next turn)",
    ]
    assert not any(secret in " ".join(lines) for secret in ("abc", "xyz", "sk-"))


def test_a_platform_disabled_and_a_binding_removed() -> None:
    new = BASE.replace(
        '[[messengers.bindings]]\nplatform = "telegram"\nchannel_id = "100"\n',
        "[messengers.telegram]\nenabled = false\n",
    )
    change = diff_config(snap(BASE), snap(new))
    assert change.lines() == ["messengers: restarted (telegram binding removed; telegram disabled)"]


def test_the_chat_approval_wait_restarts_messengers_and_says_the_executor_needs_serve() -> None:
    change = diff_config(snap(BASE), snap(BASE + "\n[messengers]\napproval_timeout_s = 30\n"))
    assert change.lines() == [
        "messengers: restarted (approval_timeout_s)",
        "needs `geode serve` again: [messengers] approval_timeout_s",
    ]


def test_schedule_jobs_are_the_schedulers_and_enabled_needs_serve() -> None:
    job = '\n[[schedule.jobs]]\nname = "j"\nevery = 60\nprompt = "p"\n'
    change = diff_config(snap(BASE), snap(BASE + job))
    assert change.areas == frozenset({SCHEDULE}) and not change.needs_serve
    assert change.applied == ("scheduler: [schedule] jobs re-applied (the ledger stays)",)
    off = diff_config(snap(BASE), snap(BASE + "\n[schedule]\nenabled = false\n"))
    assert off.areas == frozenset() and off.needs_serve == ("[schedule] enabled",)
