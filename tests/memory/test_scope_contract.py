"""The session scope contract (geode.memory.scopes): every session creator sets its scope (the operator's CLI
sessions, a chat's, a job's, a webhook route's; none for MCP), a delegated child inherits its parent's, the
turn's tool calls carry it, the session's checkpoint meta records it once, and each scope maps to its own
MEMORY.md outside every workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from geode.config_schema import GeodeConfig
from geode.home import GeodeHome
from geode.loop import LoopSettings
from geode.memory.scopes import ScopeError, chat_scope, memory_paths, parse_scope
from geode.messengers.config import MessengerBinding
from geode.messengers.session_spec import daemon_session_settings
from geode.schedule.jobs import parse_job
from geode.sessions.automation import job_turn_settings
from geode.sessions.factory import SessionSpec, create_session
from geode.tools.delegation import LanesDelegate
from geode.tools.spec import ToolContext
from geode.webhooks.session import route_turn_settings
from geode.webhooks.settings import RouteSpec
from tests.loop.conftest import Rig, tool
from tests.loop.conftest import fake_rig as fake_rig  # the loop's store + executor rig


@pytest.fixture
def home(tmp_path: Path) -> GeodeHome:
    return GeodeHome(tmp_path / "h").ensure()


def test_each_session_creator_sets_its_scope(home: GeodeHome) -> None:
    assert create_session("IPC", home=home, workspace=home.root, env={}).scope == "operator"
    assert create_session("REPL", home=home, workspace=home.root, env={}).scope == "operator"
    assert create_session("HEADLESS", home=home, workspace=home.root, env={}).scope == ""  # MCP: none
    binding = MessengerBinding(platform="telegram", channel_id="-100123:7")
    chat = daemon_session_settings(
        binding, home=home, session_id="s-c", workspace=home.root, plans=None, env={}
    )
    assert chat["scope"] == "chat:telegram--100123_7"  # the chat's workspace folder name
    job = parse_job({"name": "backup", "every": "1m", "prompt": "back up"})
    cfg = GeodeConfig()
    settings = job_turn_settings(job, occurrence="backup@2027-01-01T00:00:00Z", config=cfg, home=home, env={})
    assert settings["scope"] == "job:backup"
    route = RouteSpec.model_validate(
        {"name": "github", "path": "/hooks/github", "auth": "github", "secrets": ["GH"], "prompt": "p"}
    )
    hook = route_turn_settings(route, delivery_id="d-1", config=cfg, home=home, env={})
    assert hook["scope"] == "hook:github"
    assert SessionSpec.model_validate(chat).scope == chat["scope"]  # the settings dict is the spec
    with pytest.raises(ValueError, match="scope"):
        SessionSpec.model_validate({**chat, "scope": "chat:../etc"})


def test_a_delegated_child_inherits_its_parents_scope() -> None:
    parent = {"scope": "chat:telegram-42", "workspace": "/w", "denied_tools": [], "visible_tools": []}
    ctx = ToolContext(session_id="s-p", turn_id="t", step_id="t:step-1", operation_id="op", mode="DAEMON")
    child = LanesDelegate(None, origin="executor")._child_settings(parent, ctx, "s-child", 30.0, 1)  # type: ignore[arg-type]
    assert child["scope"] == "chat:telegram-42" and child["session_id"] == "s-child"


def test_the_scope_reaches_tool_calls_and_is_recorded_once(fake_rig: Rig) -> None:
    seen: list[str] = []
    fake_rig.executor.before_handler = lambda ctx, call: seen.append(ctx.scope)
    first = LoopSettings(model="test-model", scope="chat:telegram-42")
    provider = fake_rig.script({"tool_calls": [tool("read", "r1", key="a")]}, "done")
    fake_rig.loop(provider, settings=first).run_turn("s-sc", "turn-1", "read")
    assert seen == ["chat:telegram-42"]
    assert fake_rig.records.load_checkpoint("s-sc").state.meta["scope"] == "chat:telegram-42"
    # a later turn of the same session from another audience never re-labels it
    later = LoopSettings(model="test-model", scope="operator")
    fake_rig.loop(fake_rig.script("again"), settings=later).run_turn("s-sc", "turn-2", "again")
    assert fake_rig.records.load_checkpoint("s-sc").state.meta["scope"] == "chat:telegram-42"


@pytest.mark.parametrize(
    ("scope", "rel"),
    [
        ("operator", "memory/MEMORY.md"),
        ("chat:telegram-42", "memory/chats/telegram-42/MEMORY.md"),
        ("job:backup", "memory/jobs/backup/MEMORY.md"),
        ("hook:github", "memory/hooks/github/MEMORY.md"),
    ],
)
def test_each_scope_has_its_own_memory_file(tmp_path: Path, scope: str, rel: str) -> None:
    assert memory_paths(scope, tmp_path) == [tmp_path / rel]


def test_a_trusted_project_adds_its_memory_for_the_operator_only(tmp_path: Path) -> None:
    ws = tmp_path / "proj"
    paths = memory_paths("operator", tmp_path, workspace=ws, trusted=True)
    assert paths == [tmp_path / "memory/MEMORY.md", ws / ".geode/MEMORY.md"]
    assert memory_paths("operator", tmp_path, workspace=ws, trusted=False) == [tmp_path / "memory/MEMORY.md"]
    assert memory_paths("chat:telegram-42", tmp_path, workspace=ws, trusted=True) == [
        tmp_path / "memory/chats/telegram-42/MEMORY.md"
    ]
    assert memory_paths("", tmp_path) == []


@pytest.mark.parametrize("bad", ["chat:..", "chat:a/b", "chat:", "team:x", "Operator", "chat:a b"])
def test_a_malformed_scope_is_a_named_error(bad: str) -> None:
    with pytest.raises(ScopeError, match="scope"):
        parse_scope(bad)


def test_a_key_that_is_not_one_folder_name_is_refused() -> None:
    for key in ("..", "a/b", "", "a b"):
        with pytest.raises(ScopeError, match="scope"):
            chat_scope(key)
