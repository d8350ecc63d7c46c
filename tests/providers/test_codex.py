"""Codex subscription: tokens from the Codex CLI auth file, refresh before expiry and exactly once on 401."""

from __future__ import annotations

import base64
import json
import random
import time
from pathlib import Path

import pytest

from geode.config_schema import GeodeConfig
from geode.providers.codex import CodexAuth, CodexProvider, jwt_exp
from geode.providers.retry import Retrier
from geode.providers.selection import build_provider
from geode.providers.types import ProviderError, ProviderErrorKind
from geode.testing.scenario import Scenario, ScriptedError, ScriptedReply
from tests.providers.conftest import request


def jwt(exp: float) -> str:
    def b64(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{b64({'alg': 'none'})}.{b64({'exp': int(exp), 'sub': 'user'})}.sig"


def write_auth(path: Path, exp: float) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    auth = path / "auth.json"
    tokens = {"access_token": jwt(exp), "refresh_token": "rt-1", "id_token": "idt", "account_id": "acct-42"}
    auth.write_text(
        json.dumps({"OPENAI_API_KEY": None, "tokens": tokens, "last_refresh": "2026-01-01T00:00:00Z"})
    )
    return auth


def provider(auth_file: Path, server, events=None) -> CodexProvider:
    auth = CodexAuth(auth_file, refresh_url=f"{server.base_url}/oauth/token")
    retrier = Retrier(sleep=lambda s: None, rng=random.Random(1))
    return CodexProvider(
        auth,
        backend_url=f"{server.base_url}/backend-api/codex",
        retrier=retrier,
        on_event=events.append if events is not None else None,
    )


UNAUTHORIZED = ScriptedReply(error=ScriptedError(status=401, message="token expired"))


def test_jwt_exp():
    assert jwt_exp(jwt(1234567890)) == 1234567890
    assert jwt_exp("not-a-jwt") is None


def test_refresh_once_on_401(tmp_path, server):
    auth_file = write_auth(tmp_path / "codex", time.time() + 3600)
    new_token = jwt(time.time() + 7200)
    server.set_scenario(Scenario.of(UNAUTHORIZED, "after refresh", oauth_access_token=new_token))
    events = []
    resp = provider(auth_file, server, events).complete(request("openai-responses"))
    assert resp.text == "after refresh" and resp.provider == "codex"
    assert [r.wire for r in server.requests] == ["openai-responses", "oauth-token", "openai-responses"]
    first, refresh, second = server.requests
    assert first.path == second.path == "/backend-api/codex/responses"
    assert first.headers["authorization"] != second.headers["authorization"]
    assert refresh.body["grant_type"] == "refresh_token" and refresh.body["refresh_token"] == "rt-1"
    saved = json.loads(auth_file.read_text())
    assert saved["tokens"]["access_token"] == new_token
    assert saved["tokens"]["refresh_token"].startswith("scripted-refresh-")
    assert saved["last_refresh"] != "2026-01-01T00:00:00Z"
    assert auth_file.stat().st_mode & 0o777 == 0o600
    assert [e.type for e in events] == ["auth_refresh"]


def test_persistent_401_refreshes_only_once(tmp_path, server):
    auth_file = write_auth(tmp_path / "codex", time.time() + 3600)
    server.set_scenario(Scenario(replies=(UNAUTHORIZED,), repeat_last=True))
    with pytest.raises(ProviderError) as info:
        provider(auth_file, server).complete(request("openai-responses"))
    assert info.value.kind is ProviderErrorKind.AUTH
    assert [r.wire for r in server.requests] == ["openai-responses", "oauth-token", "openai-responses"]


def test_refresh_before_expiry(tmp_path, server):
    auth_file = write_auth(tmp_path / "codex", time.time() + 30)  # inside the refresh margin
    server.set_scenario(Scenario.of("fresh"))
    assert provider(auth_file, server).complete(request("openai-responses")).text == "fresh"
    assert [r.wire for r in server.requests] == ["oauth-token", "openai-responses"]


def test_codex_request_shape(tmp_path, server):
    auth_file = write_auth(tmp_path / "codex", time.time() + 3600)
    server.set_scenario(Scenario.of("ok"))
    provider(auth_file, server).complete(request("openai-responses", stream=False))
    (rec,) = server.requests
    assert rec.body["stream"] is True and rec.body["store"] is False
    assert "max_output_tokens" not in rec.body
    assert rec.headers["chatgpt-account-id"].startswith("<redacted:")
    assert rec.headers["openai-beta"] == "responses=experimental"


def test_codex_from_settings(tmp_path, server):
    write_auth(tmp_path / "codex", time.time() + 3600)
    env = {"CODEX_HOME": str(tmp_path / "codex"), "CODEX_BASE_URL": f"{server.base_url}/backend-api/codex"}
    cfg = {"providers": {"codex": {"refresh_url": f"{server.base_url}/oauth/token"}}}
    server.set_scenario(Scenario.of(UNAUTHORIZED, "via settings"))
    p = build_provider("gpt-6-sol", env=env, config=GeodeConfig.from_raw(cfg), sleep=lambda s: None)
    assert p.name == "codex"
    assert p.complete(request("openai-responses")).text == "via settings"


def test_missing_auth_file_is_an_auth_error(tmp_path):
    with pytest.raises(ProviderError) as info:
        CodexAuth(tmp_path / "nope" / "auth.json")
    assert info.value.kind is ProviderErrorKind.AUTH and "codex login" in info.value.hint


def test_token_refreshed_by_the_codex_cli_is_adopted(tmp_path, server):
    auth_file = write_auth(tmp_path / "codex", time.time() + 3600)
    p = provider(auth_file, server)
    data = json.loads(auth_file.read_text())
    data["tokens"]["access_token"] = jwt(time.time() + 5000)  # the CLI refreshed meanwhile
    auth_file.write_text(json.dumps(data))
    server.set_scenario(Scenario.of(UNAUTHORIZED, "with the CLI's token"))
    assert p.complete(request("openai-responses")).text == "with the CLI's token"
    assert [r.wire for r in server.requests] == ["openai-responses", "openai-responses"]  # no refresh call
    assert server.requests[0].headers["authorization"] != server.requests[1].headers["authorization"]
