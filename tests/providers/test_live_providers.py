"""LiveProviders: each lookup follows its config source (config.toml and .env as of the last reload); a
built provider is reused only while model, endpoint and key fingerprint are unchanged; setup problems are
one final line; no key stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from geode.home import GeodeHome
from geode.protocol.errors import ConfigError
from geode.providers.catalogue import routable, unknown_model_message
from geode.providers.live import LiveProviders, daemon_view
from geode.providers.selection import UnusableProvider
from geode.providers.setup_error import SetupError
from geode.providers.types import ModelRequest


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GeodeHome:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "GEODE_MODEL", "MY_KEY"):
        monkeypatch.delenv(var, raising=False)
    h = GeodeHome(tmp_path / "gh").ensure()
    h.ensure_run_dir()  # the daemon's: where run/providers.json goes
    h.config_file.write_text('[providers]\nmodel = "claude-sonnet-5"\n')
    return h


def test_no_key_is_one_final_line_and_the_key_from_dotenv_is_used_next_time(home: GeodeHome) -> None:
    live = LiveProviders(home)
    broken = live.get(None)
    with pytest.raises(SetupError) as err:
        broken.complete(ModelRequest(model="claude-sonnet-5", messages=()))
    assert err.value.message == (
        "no ANTHROPIC_API_KEY for claude-sonnet-5: set it in $GEODE_HOME/.env or the daemon's environment"
    )
    assert not err.value.retryable
    home.env_file.write_text("ANTHROPIC_API_KEY=sk-secret-one\n")
    assert isinstance(live.get(None), UnusableProvider)  # saving .env alone changes nothing until a reload
    live.source.reload()
    first = live.get(None)
    assert first is not broken and live.get(None) is first  # unchanged settings: reused
    home.env_file.write_text("ANTHROPIC_API_KEY=sk-secret-two\n")
    live.source.reload()
    second = live.get(None)
    assert second is not first  # a new key fingerprint: a new provider
    home.config_file.write_text(
        '[providers]\nmodel = "claude-sonnet-5"\n[providers.anthropic]\nbase_url = "http://127.0.0.1:9"\n'
    )
    assert live.get(None) is second  # the file saved, not reloaded
    live.source.reload()
    assert live.get(None) is not second  # a new endpoint
    view = daemon_view(home)
    assert view is not None and view["base_url"] == "http://127.0.0.1:9"
    assert view["key_source"] == "ANTHROPIC_API_KEY (.env)" and view["key_fingerprint"]
    assert "sk-secret" not in (home.run_dir / "providers.json").read_text()


def test_a_configured_key_variable_is_named(home: GeodeHome) -> None:
    home.config_file.write_text(
        '[providers]\nmodel = "claude-sonnet-5"\n[providers.anthropic]\napi_key_env = "MY_KEY"\n'
    )
    assert "no MY_KEY for claude-sonnet-5" in LiveProviders(home).describe(None)["problem"]


def test_a_broken_config_keeps_the_last_good_one(home: GeodeHome) -> None:
    live = LiveProviders(home)
    assert live.describe(None)["model"] == "claude-sonnet-5"
    home.config_file.write_text("[providers\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        live.source.reload()  # a broken file on reload: a one-line error, the old snapshot stays
    assert live.describe(None)["model"] == "claude-sonnet-5"


def test_unknown_models_list_the_known_prefixes(home: GeodeHome) -> None:
    msg = unknown_model_message("foo-bar")
    assert msg is not None and "'foo-bar'" in msg and "claude-…" in msg and "gpt-…" in msg
    assert all(routable(m) for m in ("claude-x", "gpt-9", "glm-5", "openrouter/a/b", "my-codex", "o3"))
    home.env_file.write_text("ANTHROPIC_API_KEY=sk-x\nOPENAI_API_KEY=sk-y\n")
    assert LiveProviders(home).describe("foo-bar")["problem"] == msg


def test_a_turns_lookup_rewrites_the_daemons_view_only_when_it_changed(
    home: GeodeHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-one")
    live = LiveProviders(home, who="loop-1")
    path = home.run_dir / "providers.json"
    live.get(None)
    written = path.stat().st_ino  # each write is a new file renamed over the old one
    for _ in range(3):  # each turn looks its provider up: the same view, no write and rename per turn
        live.get(None)
    assert path.stat().st_ino == written
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-two")  # another key: what doctor compares changed
    live.get(None)
    view = daemon_view(home)
    assert path.stat().st_ino != written and view is not None and view["by"] == "loop-1"
    assert view["key_fingerprint"] and "sk-two" not in path.read_text()
    path.write_text("{}")  # a file that says something else (another process, or damaged): written again
    live.get(None)
    again = daemon_view(home)
    assert again is not None and again["key_fingerprint"] == view["key_fingerprint"]
    written = path.stat().st_ino
    live.describe()  # start and `geode reload`: always written, with a new time (reload waits for it)
    assert path.stat().st_ino != written
