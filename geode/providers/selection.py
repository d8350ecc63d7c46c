"""Provider selection: the model (argument, GEODE_MODEL, config) picks the provider by prefix; keys and
base URLs come from the environment, ``$GEODE_HOME/.env`` and ``[providers.<name>]`` config.
Secrets never leave here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geode.home import GeodeHome
from geode.providers.adapter_base import Endpoint, WireAdapter
from geode.providers.catalogue import DEFAULT_MODEL, WireApi, model_info, unknown_model_message
from geode.providers.codex import DEFAULT_REFRESH_URL, CodexAuth, CodexProvider, codex_auth_path
from geode.providers.events import EventCallback
from geode.providers.fallback import FallbackProvider
from geode.providers.pricing import Price, prices_from_config
from geode.providers.retry import Retrier
from geode.providers.settings import PROVIDER_TIMEOUT_S, RetryPolicy
from geode.providers.setup_error import SetupError
from geode.providers.types import ModelRequest, ModelResponse, Provider, ProviderErrorKind
from geode.providers.vendors import make_adapter, vendor

if TYPE_CHECKING:
    from geode.config_schema import GeodeConfig


@dataclass
class ProviderSettings:
    """Everything needed to build one provider for one model. ``api_key`` is never part of ``repr``."""

    model: str
    provider: str
    wire: WireApi
    base_url: str
    api_key: str | None = field(default=None, repr=False)
    key_source: str = ""
    timeout_s: float = PROVIDER_TIMEOUT_S
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    fallback: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    codex_auth_file: Path | None = None
    codex_refresh_url: str = DEFAULT_REFRESH_URL
    prices: dict[str, Price] = field(default_factory=dict)


@dataclass
class Sources:
    """Where settings come from: merged env (process env over ``.env``) and the typed config snapshot."""

    env: Mapping[str, str]
    dotenv: Mapping[str, str]
    config: GeodeConfig
    process: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def load(
        cls,
        *,
        home: GeodeHome | None = None,
        env: Mapping[str, str] | None = None,
        config: GeodeConfig | None = None,
        dotenv: Mapping[str, str] | None = None,
    ) -> Sources:
        """``config`` and ``dotenv`` from a :class:`~geode.config_source.ConfigSource` (a child's); when
        not given, ``home``'s file and ``.env`` read once now."""
        if home is None and (env is None or config is None):
            home = GeodeHome.from_env(None if env is None else env.get("GEODE_HOME"))
        if dotenv is None:
            dotenv = home.load_dotenv() if home is not None else {}
        if config is None:  # lazy: the schema's leaves import the hooks package, which reaches us
            from geode.config_schema import GeodeConfig
            from geode.config_source import ConfigSource

            config = ConfigSource(home, GeodeConfig.from_raw).snapshot if home is not None else GeodeConfig()
        process = dict(os.environ if env is None else env)
        return cls(env={**dotenv, **process}, dotenv=dotenv, config=config, process=process)

    @property
    def providers(self) -> dict[str, Any]:
        """``[providers]`` of the snapshot as plain data (vendor tables by their names)."""
        return self.config.providers.model_dump(by_alias=True, exclude_none=True)

    def section(self, name: str) -> dict[str, Any]:
        sec = self.providers.get(name)
        return dict(sec) if isinstance(sec, dict) else {}

    def key(self, name: str) -> tuple[str | None, str]:
        """(key, where it came from) for a vendor; the key itself is never logged."""
        spec, sec = vendor(name), self.section(name)
        env_name = sec.get("api_key_env") or spec.key_env
        if env_name and self.env.get(env_name):
            origin = ".env" if env_name in self.dotenv and env_name not in self.process else "env"
            return self.env[env_name], f"{env_name} ({origin})"
        return None, ""


def choose_model(model: str | None, sources: Sources) -> str:
    providers = sources.providers
    return (
        model
        or sources.env.get("GEODE_MODEL")
        or providers.get("model")
        or sources.config.model
        or DEFAULT_MODEL
    )


def _codex_preferred(sources: Sources) -> bool:
    login = sources.section("openai").get("login", "auto")
    if login == "apikey":
        return False
    return login == "subscription" or _codex_file(sources).exists()


def _codex_file(sources: Sources) -> Path:
    raw = sources.section("codex").get("auth_file")
    return Path(raw).expanduser() if raw else codex_auth_path(sources.env)


def resolve_settings(
    model: str | None = None,
    *,
    home: GeodeHome | None = None,
    env: Mapping[str, str] | None = None,
    config: GeodeConfig | None = None,
    sources: Sources | None = None,
) -> ProviderSettings:
    """Settings for ``model`` (or GEODE_MODEL / ``[providers] model`` / the default)."""
    src = sources or Sources.load(home=home, env=env, config=config)
    chosen = choose_model(model, src)
    info = model_info(chosen)
    provider: str = info.provider
    if provider == "openai" and "codex" in info.sources and _codex_preferred(src):
        provider = "codex"
    spec, sec = vendor(provider), src.section(provider)
    base_url = (src.env.get(spec.base_url_env or "") or sec.get("base_url") or spec.default_base_url).rstrip(
        "/"
    )
    api_key, key_source = src.key(provider) if provider != "codex" else (None, "")
    wire: WireApi = sec.get("wire") or (info.wire if provider != "codex" else "openai-responses")
    providers = src.providers
    return ProviderSettings(
        model=chosen,
        provider=provider,
        wire=wire,
        base_url=base_url,
        api_key=api_key,
        key_source=key_source,
        timeout_s=float(sec.get("timeout_s") or providers.get("timeout_s") or PROVIDER_TIMEOUT_S),
        retry=RetryPolicy.from_config(providers.get("retry")),
        fallback=tuple(providers.get("fallback") or ()),
        options={**spec.options, **(sec.get("options") or {})},
        codex_auth_file=_codex_file(src) if provider == "codex" else None,
        codex_refresh_url=src.section("codex").get("refresh_url") or DEFAULT_REFRESH_URL,
        prices=prices_from_config(providers),
    )


def provider_from_settings(
    settings: ProviderSettings,
    *,
    on_event: EventCallback | None = None,
    sleep: Callable[[float], None] | None = None,
) -> Provider:
    """One provider (no fallback chain) from resolved settings; ``provider.model`` is ``settings.model``."""
    provider = _build_one(settings, on_event=on_event, sleep=sleep)
    provider.model = settings.model
    inner = provider.inner if isinstance(provider, CodexProvider) else provider
    inner.prices = dict(settings.prices)
    return provider


def _build_one(
    settings: ProviderSettings,
    *,
    on_event: EventCallback | None,
    sleep: Callable[[float], None] | None,
) -> WireAdapter | CodexProvider:
    retrier = Retrier(policy=settings.retry, on_event=on_event)
    if sleep is not None:
        retrier.sleep = sleep
    if settings.provider == "codex":
        auth = CodexAuth(
            settings.codex_auth_file or codex_auth_path(), refresh_url=settings.codex_refresh_url
        )
        return CodexProvider(
            auth,
            backend_url=settings.base_url,
            retrier=retrier,
            on_event=on_event,
            timeout_s=settings.timeout_s,
        )
    endpoint = Endpoint(
        provider=settings.provider,
        base_url=settings.base_url,
        api_key=settings.api_key,
        timeout_s=settings.timeout_s,
        options=dict(settings.options),
    )
    return make_adapter(settings.wire, endpoint, retrier=retrier)


def build_provider(
    model: str | None = None,
    *,
    home: GeodeHome | None = None,
    env: Mapping[str, str] | None = None,
    config: GeodeConfig | None = None,
    dotenv: Mapping[str, str] | None = None,
    on_event: EventCallback | None = None,
    sleep: Callable[[float], None] | None = None,
) -> Provider:
    """The provider for ``model`` from env/config, in the configured fallback chain (empty by default)."""
    src = Sources.load(home=home, env=env, config=config, dotenv=dotenv)
    settings = resolve_settings(model, sources=src)
    primary = provider_from_settings(settings, on_event=on_event, sleep=sleep)
    if not settings.fallback:
        return primary
    chain = [
        (m, provider_from_settings(resolve_settings(m, sources=src), on_event=on_event, sleep=sleep))
        for m in settings.fallback
    ]
    return FallbackProvider(primary, chain, on_event=on_event)


class UnusableProvider:
    """Stands in for a provider that cannot work: every call fails at once with the same clear error."""

    def __init__(self, model: str, error: SetupError, name: str = "") -> None:
        self.model = model
        self.name = name
        self.error = error

    def complete(self, request: ModelRequest, on_delta=None) -> ModelResponse:  # type: ignore[no-untyped-def]
        raise SetupError(self.error.kind, self.error.message)


def setup_error(settings: ProviderSettings, sources: Sources | None = None) -> SetupError | None:
    """Why ``settings`` cannot work before any request is sent (unknown model, missing key), else None.
    ``sources`` names a configured ``api_key_env`` in the message instead of the vendor's default."""
    unknown = unknown_model_message(settings.model)
    if unknown is not None:
        return SetupError(ProviderErrorKind.BAD_REQUEST, unknown)
    if settings.provider == "codex" or settings.api_key:
        return None
    env_name = vendor(settings.provider).key_env
    if sources is not None:
        env_name = sources.section(settings.provider).get("api_key_env") or env_name
    if not env_name:
        return None
    return SetupError(
        ProviderErrorKind.AUTH,
        f"no {env_name} for {settings.model}: set it in $GEODE_HOME/.env or the daemon's environment",
    )


def key_fingerprint(key: str | None) -> str:
    """A short, one-way fingerprint of a key (cache keys, comparing two environments); never the key."""
    if not key:
        return ""
    import hashlib

    return hashlib.sha256(key.encode()).hexdigest()[:10]
