"""OpenAI Codex subscription: Codex CLI OAuth tokens, refreshed before expiry and once on 401; Responses API.

The auth file is ``$CODEX_HOME/auth.json`` (default ``~/.codex/auth.json``):
``{"tokens": {"access_token", "refresh_token", "id_token", "account_id"}, "last_refresh": "<iso>"}``.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from geode.providers.adapter_base import Endpoint
from geode.providers.events import EventCallback, ProviderEvent
from geode.providers.openai_responses import OpenAIResponsesAdapter
from geode.providers.retry import Retrier
from geode.providers.types import DeltaCallback, ModelRequest, ModelResponse, ProviderError, ProviderErrorKind

DEFAULT_BACKEND_URL = "https://chatgpt.com/backend-api/codex"
DEFAULT_REFRESH_URL = "https://auth.openai.com/oauth/token"
CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"  # the Codex CLI's public OAuth client id
REFRESH_MARGIN_S = 300.0


def codex_auth_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    home = env.get("CODEX_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".codex") / "auth.json"


def jwt_exp(token: str) -> float | None:
    """The ``exp`` claim of a JWT (unverified: only used to decide when to refresh)."""
    try:
        payload = token.split(".")[1]
        payload += "=" * (-len(payload) % 4)
        exp = json.loads(base64.urlsafe_b64decode(payload)).get("exp")
    except (IndexError, ValueError, AttributeError):
        return None
    return float(exp) if isinstance(exp, int | float) else None


class CodexAuth:
    """The Codex CLI token file: read, refresh (POST to ``refresh_url``), write back atomically (0600)."""

    def __init__(
        self,
        path: Path,
        *,
        refresh_url: str = DEFAULT_REFRESH_URL,
        clock: Callable[[], float] = time.time,
        timeout_s: float = 30.0,
    ) -> None:
        self.path = path
        self.refresh_url = refresh_url
        self.clock = clock
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._data = self._read()

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError as exc:
            raise ProviderError(
                ProviderErrorKind.AUTH,
                f"no Codex auth file at {self.path}",
                hint="run `codex login` (or set CODEX_HOME)",
            ) from exc
        except json.JSONDecodeError as exc:
            raise ProviderError(
                ProviderErrorKind.AUTH, f"{self.path}: invalid JSON", hint="run `codex login`"
            ) from exc
        if not isinstance(data.get("tokens"), dict) or not data["tokens"].get("access_token"):
            raise ProviderError(ProviderErrorKind.AUTH, f"{self.path}: no tokens", hint="run `codex login`")
        return data

    @property
    def access_token(self) -> str:
        return str(self._data["tokens"]["access_token"])

    @property
    def account_id(self) -> str | None:
        return self._data["tokens"].get("account_id")

    def needs_refresh(self) -> bool:
        exp = jwt_exp(self.access_token)
        return exp is not None and exp - self.clock() < REFRESH_MARGIN_S

    def refresh(self, stale: str | None = None) -> str:
        """Exchange the refresh token for new tokens; returns the new access token.

        ``stale`` is the token the caller saw rejected or expiring: when another thread (or the Codex CLI, via
        the file) already replaced it, that token is adopted with no refresh request (refresh tokens rotate).
        """
        with self._lock:
            if stale is not None:
                try:
                    on_disk = self._read()
                except ProviderError:
                    on_disk = self._data
                if on_disk["tokens"]["access_token"] != stale:
                    self._data = on_disk
                    return self.access_token
                if self.access_token != stale:
                    return self.access_token
            tokens = self._data["tokens"]
            payload = {
                "client_id": CLIENT_ID,
                "grant_type": "refresh_token",
                "refresh_token": tokens.get("refresh_token"),
                "scope": "openid profile email",
            }
            req = urllib.request.Request(
                self.refresh_url,
                data=json.dumps(payload).encode(),
                method="POST",
                headers={"content-type": "application/json"},
            )
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    fresh = json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                raise ProviderError(
                    ProviderErrorKind.AUTH,
                    f"Codex token refresh failed: HTTP {exc.code}",
                    hint="run `codex login` again",
                    status=exc.code,
                ) from exc
            except (urllib.error.URLError, OSError, ValueError) as exc:
                raise ProviderError(
                    ProviderErrorKind.CONNECTION,
                    f"Codex token refresh failed: {exc}",
                    hint="check the network / refresh URL",
                ) from exc
            for key in ("access_token", "refresh_token", "id_token"):
                if fresh.get(key):
                    tokens[key] = fresh[key]
            self._data["last_refresh"] = datetime.fromtimestamp(self.clock(), UTC).isoformat()
            self._write()
            return str(tokens["access_token"])

    def _write(self) -> None:
        tmp = self.path.with_suffix(".json.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(self._data, f, indent=2)
        os.replace(tmp, self.path)


class CodexProvider:
    """Responses API against the Codex backend with the subscription's OAuth token."""

    name = "codex"
    adapter = "openai-responses"

    def __init__(
        self,
        auth: CodexAuth,
        *,
        backend_url: str = DEFAULT_BACKEND_URL,
        retrier: Retrier | None = None,
        on_event: EventCallback | None = None,
        timeout_s: float = 300.0,
    ) -> None:
        self.auth = auth
        self.on_event = on_event
        self.model = ""  # the resolved default model id when built from settings
        headers = {"OpenAI-Beta": "responses=experimental", "originator": "codex_cli_rs"}
        if auth.account_id:
            headers["chatgpt-account-id"] = auth.account_id
        endpoint = Endpoint(
            provider="codex",
            base_url=backend_url,
            api_key=auth.access_token,
            timeout_s=timeout_s,
            default_headers=headers,
            options={"store": False, "force_stream": True, "send_max_tokens": False},
        )
        self.inner = OpenAIResponsesAdapter(endpoint, retrier=retrier)
        if on_event is not None:
            self.inner.retrier.on_event = on_event

    def _refresh(self, model: str, why: str, stale: str, on_event: EventCallback | None) -> None:
        self.inner.set_api_key(self.auth.refresh(stale))
        event = ProviderEvent(type="auth_refresh", provider=self.name, model=model, reason=why)
        for cb in (self.on_event, on_event):
            if cb is not None:
                cb(event)

    def complete(
        self,
        request: ModelRequest,
        on_delta: DeltaCallback | None = None,
        *,
        on_event: EventCallback | None = None,
    ) -> ModelResponse:
        if self.auth.needs_refresh():
            self._refresh(request.model, "expiring", self.auth.access_token, on_event)
        used = self.auth.access_token
        if self.inner.endpoint.api_key != used:  # refreshed elsewhere (another call, the Codex CLI)
            self.inner.set_api_key(used)
        try:
            return self.inner.complete(request, on_delta, on_event=on_event)
        except ProviderError as err:
            if err.status != 401:
                raise
        self._refresh(request.model, "401", used, on_event)
        return self.inner.complete(request, on_delta, on_event=on_event)
