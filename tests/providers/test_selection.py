"""Selection from env/config/.env, base URL overrides, fallback chains, and the secret-free report."""

from __future__ import annotations

import json

import pytest

from geode.config_schema import GeodeConfig
from geode.home import GeodeHome
from geode.providers.fallback import FallbackProvider
from geode.providers.report import provider_report
from geode.providers.selection import build_provider, resolve_settings
from geode.providers.types import ProviderError, ProviderErrorKind
from geode.testing.scenario import Scenario, ScriptedError, ScriptedReply
from tests.providers.conftest import request

SECRET = "sk-ant-VERY-SECRET-0123456789"


@pytest.fixture
def home(tmp_path) -> GeodeHome:
    return GeodeHome(tmp_path / "home")


def test_default_model_and_provider(home):
    s = resolve_settings(home=home, env={}, config=GeodeConfig())
    assert (s.model, s.provider, s.wire) == ("claude-opus-5-5", "anthropic", "anthropic-messages")
    assert s.base_url == "https://api.anthropic.com"
    assert s.fallback == ()
    assert s.retry.max_attempts == 3 and s.retry.base_delay_s == 2.0 and s.retry.max_delay_s == 30.0


def test_model_precedence(home):
    cfg = {"providers": {"model": "glm-5.3"}}
    assert resolve_settings(home=home, env={}, config=GeodeConfig.from_raw(cfg)).model == "glm-5.3"
    assert (
        resolve_settings(
            home=home, env={"GEODE_MODEL": "claude-sonnet-5"}, config=GeodeConfig.from_raw(cfg)
        ).model
        == "claude-sonnet-5"
    )
    assert resolve_settings(
        "gpt-6-sol", home=home, env={"GEODE_MODEL": "claude-sonnet-5"}, config=GeodeConfig.from_raw(cfg)
    ).model == ("gpt-6-sol")


@pytest.mark.parametrize(
    ("model", "provider", "key_env", "base"),
    [
        ("claude-haiku-4-5-20251001", "anthropic", "ANTHROPIC_API_KEY", "https://api.anthropic.com"),
        ("gpt-6-sol", "openai", "OPENAI_API_KEY", "https://api.openai.com/v1"),
        ("glm-5.3", "glm", "ZAI_API_KEY", "https://api.z.ai/api/paas/v4"),
        ("openrouter/openrouter/free", "openrouter", "OPENROUTER_API_KEY", "https://openrouter.ai/api/v1"),
    ],
)
def test_keys_and_endpoints_per_vendor(home, model, provider, key_env, base):
    s = resolve_settings(
        model, home=home, env={key_env: "k-123", "CODEX_HOME": str(home.root)}, config=GeodeConfig()
    )
    assert (s.provider, s.api_key, s.base_url) == (provider, "k-123", base)
    assert s.key_source == f"{key_env} (env)"
    assert "k-123" not in repr(s)


def test_base_url_overrides(home):
    env = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9/", "OPENAI_BASE_URL": "http://127.0.0.1:8/v1"}
    assert (
        resolve_settings("claude-opus-5", home=home, env=env, config=GeodeConfig()).base_url
        == "http://127.0.0.1:9"
    )
    cfg = {"providers": {"glm": {"base_url": "http://glm.local/v4"}, "openai": {"login": "apikey"}}}
    assert (
        resolve_settings("glm-5.3", home=home, env={}, config=GeodeConfig.from_raw(cfg)).base_url
        == "http://glm.local/v4"
    )
    assert (
        resolve_settings("gpt-6-sol", home=home, env=env, config=GeodeConfig.from_raw(cfg)).base_url
        == "http://127.0.0.1:8/v1"
    )


def test_key_from_dotenv(home):
    home.root.mkdir(parents=True)
    home.env_file.write_text(f"ANTHROPIC_API_KEY='{SECRET}'\n")
    s = resolve_settings(home=home, env={}, config=GeodeConfig())
    assert s.api_key == SECRET
    assert s.key_source == "ANTHROPIC_API_KEY (.env)"


def test_codex_preferred_when_auth_file_exists(home, tmp_path):
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    (codex_home / "auth.json").write_text(json.dumps({"tokens": {"access_token": "a", "refresh_token": "r"}}))
    env = {"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": "k"}
    s = resolve_settings("gpt-6-sol", home=home, env=env, config=GeodeConfig())
    assert (s.provider, s.wire, s.codex_auth_file) == ("codex", "openai-responses", codex_home / "auth.json")
    forced = resolve_settings(
        "gpt-6-sol",
        home=home,
        env=env,
        config=GeodeConfig.from_raw({"providers": {"openai": {"login": "apikey"}}}),
    )
    assert forced.provider == "openai"
    assert (
        resolve_settings("gpt-5.5", home=home, env=env, config=GeodeConfig()).provider == "openai"
    )  # API only


def test_any_server_speaking_the_wire_works(home, server):
    """A provider built purely from env (ANTHROPIC_BASE_URL) talks to whatever server is there."""
    server.set_scenario(Scenario.of("hello via env"))
    env = {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": SECRET}
    provider = build_provider(home=home, env=env, config=GeodeConfig())
    resp = provider.complete(request("anthropic-messages"))
    assert resp.text == "hello via env" and resp.provider == "anthropic"
    env = {"OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": "k", "CODEX_HOME": str(home.root)}
    server.set_scenario(Scenario.of("hello responses"))
    assert build_provider("gpt-6-sol", home=home, env=env, config=GeodeConfig()).complete(
        request("openai-responses")
    ).text == ("hello responses")
    cfg = {"providers": {"openai": {"wire": "openai-chat"}}}
    server.set_scenario(Scenario.of("hello chat"))
    assert build_provider("gpt-6-sol", home=home, env=env, config=GeodeConfig.from_raw(cfg)).complete(
        request("openai-chat")
    ).text == ("hello chat")
    assert server.requests[-1].wire == "openai-chat"
    assert "max_completion_tokens" in server.requests[-1].body


def test_fallback_chain_is_empty_by_default_and_visible_when_used(home, server):
    env = {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "k"}
    assert not isinstance(build_provider(home=home, env=env, config=GeodeConfig()), FallbackProvider)
    overloaded = ScriptedReply(error=ScriptedError(status=529, type="overloaded_error", message="overloaded"))
    server.set_scenario(Scenario.of(overloaded, overloaded, overloaded, "from the fallback"))
    events = []
    cfg = {"providers": {"fallback": ["claude-sonnet-5"]}}
    provider = build_provider(
        home=home, env=env, config=GeodeConfig.from_raw(cfg), on_event=events.append, sleep=lambda s: None
    )
    resp = provider.complete(request("anthropic-messages"))
    assert resp.text == "from the fallback"
    assert [r.body["model"] for r in server.requests] == ["claude-opus-5-5"] * 3 + ["claude-sonnet-5"]
    fallback = [e for e in events if e.type == "fallback"]
    assert len(fallback) == 1
    assert (fallback[0].model, fallback[0].to_model, fallback[0].reason) == (
        "claude-opus-5-5",
        "claude-sonnet-5",
        "overloaded",
    )


def test_fallback_not_used_for_bad_requests(home, server):
    env = {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "k"}
    server.set_scenario(Scenario.of(ScriptedReply(error=ScriptedError(status=400, message="bad")), "unused"))
    provider = build_provider(
        home=home, env=env, config=GeodeConfig.from_raw({"providers": {"fallback": ["claude-sonnet-5"]}})
    )
    with pytest.raises(ProviderError) as info:
        provider.complete(request("anthropic-messages"))
    assert info.value.kind is ProviderErrorKind.BAD_REQUEST
    assert len(server.requests) == 1


def test_provider_report_never_prints_secrets(home, tmp_path):
    env = {"ANTHROPIC_API_KEY": SECRET, "ZAI_API_KEY": "zai-SECRET-xyz", "CODEX_HOME": str(tmp_path / "none")}
    report = {s.provider: s for s in provider_report(home=home, env=env, config=GeodeConfig())}
    assert set(report) == {"anthropic", "openai", "glm", "openrouter", "codex"}
    assert report["anthropic"].usable and report["glm"].usable
    assert not report["openai"].usable and not report["codex"].usable
    assert "selected" in report["anthropic"].note
    text = "\n".join(s.line() for s in report.values()) + repr(report)
    assert SECRET not in text and "SECRET" not in text
    assert "OPENAI_API_KEY not set" in text


def test_built_providers_expose_their_model_and_adapter(home):
    p = build_provider("glm-5.3", home=home, env={}, config=GeodeConfig())
    assert (p.name, p.adapter, p.model) == ("glm", "openai-chat", "glm-5.3")
    p = build_provider(
        home=home,
        env={"GEODE_MODEL": "claude-sonnet-5"},
        config=GeodeConfig.from_raw({"providers": {"fallback": ["glm-5.3"]}}),
    )
    assert isinstance(p, FallbackProvider) and p.model == "claude-sonnet-5" and p.name == "anthropic"


def test_configured_prices_fill_cost(home, server):
    server.set_scenario(
        Scenario.of({"text": "ok", "usage": {"input_tokens": 1_000_000, "output_tokens": 2_000_000}})
    )
    env = {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "k"}
    cfg = {"providers": {"pricing": {"claude-opus-5-5": {"input_per_mtok": 5.0, "output_per_mtok": 25.0}}}}
    resp = build_provider(home=home, env=env, config=GeodeConfig.from_raw(cfg)).complete(
        request("anthropic-messages")
    )
    assert resp.usage.cost_usd == 55.0
    server.set_scenario(Scenario.of("ok"))
    assert (
        build_provider(home=home, env=env, config=GeodeConfig())
        .complete(request("anthropic-messages"))
        .usage.cost_usd
        == 0
    )
