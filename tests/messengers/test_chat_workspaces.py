"""A workspace per chat: each binding's own directory under ``$GEODE_HOME/workspaces`` (0700), or the one the
binding sets (an absolute path, refused at config time otherwise)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from geode.home import GeodeHome
from geode.messengers.config import MessengerBinding
from geode.messengers.workspaces import chat_workspace
from geode.protocol.errors import ConfigError


def _b(platform: str, channel_id: str, **kw: object) -> MessengerBinding:
    return MessengerBinding.model_validate({"platform": platform, "channel_id": channel_id, **kw})


def test_each_chat_gets_its_own_private_workspace(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "gh").ensure()
    chats = [
        _b("telegram", "-1001234"),
        _b("telegram", "-1001234:7"),  # a forum topic bound on its own
        _b("slack", "C0123ABCD"),
        _b("slack", "C0123ABCD:1712.34"),
        _b("discord", "1234567890"),
    ]
    dirs = [chat_workspace(b, home) for b in chats]
    assert [d.name for d in dirs] == [
        "telegram--1001234",
        "telegram--1001234_7",
        "slack-C0123ABCD",
        "slack-C0123ABCD_1712.34",
        "discord-1234567890",
    ]
    assert len(set(dirs)) == len(dirs)  # no two chats share one
    for d in dirs:
        assert d.parent == home.root / "workspaces" and d.is_dir()
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    (dirs[0] / "note.txt").write_text("kept")
    assert chat_workspace(chats[0], home) == dirs[0] and (dirs[0] / "note.txt").read_text() == "kept"


def test_the_binding_may_name_its_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = GeodeHome(tmp_path / "gh").ensure()
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    ws = chat_workspace(_b("discord", "42", workspace="~/chats/team"), home)
    assert ws == tmp_path / "user" / "chats" / "team" and ws.is_dir()
    assert not (home.root / "workspaces").exists()


@pytest.mark.parametrize("bad", ["chats/team", "", "./x", "/a\x00b"])
def test_a_relative_workspace_is_refused_with_the_key_named(bad: str) -> None:
    with pytest.raises(ValidationError, match="workspace"):
        _b("telegram", "1", workspace=bad)


def test_a_workspace_that_cannot_be_made_is_one_named_error(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "gh").ensure()
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=r"messenger binding slack 'C01'.*cannot create it"):
        chat_workspace(_b("slack", "C01", workspace=str(tmp_path / "file" / "ws")), home)


def test_slack_session_is_thread_by_default_and_channel_only_for_a_whole_slack_channel() -> None:
    assert _b("slack", "C0123ABCD").session == "thread"
    assert _b("slack", "C0123ABCD", session="channel").session == "channel"
    with pytest.raises(ValidationError, match='session = "channel" is for Slack'):
        _b("telegram", "-100123", session="channel")
    with pytest.raises(ValidationError, match="not one thread"):
        _b("slack", "C0123ABCD:1712.34", session="channel")
    with pytest.raises(ValidationError, match="session"):
        _b("slack", "C0123ABCD", session="channels")
