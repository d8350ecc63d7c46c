"""Providers that follow the process's config source: each lookup resolves against its current snapshot and
``.env`` (both replaced only by ``geode reload``) and reuses a built provider only while its model, endpoint
and key fingerprint are unchanged.

What the daemon resolved is written to ``run/providers.json`` (model, provider, endpoint, key source and a
one-way key fingerprint, never the key) so ``geode doctor`` can compare it with the shell's view.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from geode.config_schema import GeodeConfig
from geode.config_source import ConfigSource
from geode.home import GeodeHome
from geode.providers.events import EventCallback
from geode.providers.selection import (
    ProviderSettings,
    Sources,
    UnusableProvider,
    build_provider,
    key_fingerprint,
    resolve_settings,
    setup_error,
)
from geode.providers.types import Provider

log = logging.getLogger(__name__)
MAX_CACHED = 16
STATUS_FILE = "providers.json"


def settings_view(settings: ProviderSettings, problem: str = "") -> dict[str, Any]:
    """What a resolution uses, safe to print and to store (no key material beyond a fingerprint)."""
    return {
        "model": settings.model,
        "provider": settings.provider,
        "base_url": settings.base_url,
        "key_source": settings.key_source or "not set",
        "key_fingerprint": key_fingerprint(settings.api_key),
        "problem": problem,
    }


class LiveProviders:
    """Thread-safe. ``get(model)`` returns the provider for ``model`` under the source's current snapshot."""

    def __init__(
        self,
        home: GeodeHome,
        *,
        on_event: EventCallback | None = None,
        sleep: Callable[[float], None] | None = None,
        who: str = "",
        source: ConfigSource[Any] | None = None,
    ) -> None:
        self.home = home
        self.source = source or ConfigSource(home, GeodeConfig.from_raw)  # standalone: the file, read once
        self.on_event = on_event
        self.sleep = sleep
        self.who = who
        self._cache: OrderedDict[tuple[Any, ...], Provider] = OrderedDict()
        self._lock = threading.Lock()

    def sources(self) -> Sources:
        """Process env over the source's ``.env``, and its snapshot (both as of start or the last reload)."""
        source = self.source
        return Sources.load(home=self.home, config=source.snapshot, dotenv=source.env)

    def describe(self, model: str | None = None) -> dict[str, Any]:
        """Resolve without building (and publish): what a new session for ``model`` would use."""
        src = self.sources()
        settings = resolve_settings(model, sources=src)
        problem = setup_error(settings, src)
        return self.publish(settings, problem.message if problem else "")

    def get(self, model: str | None) -> Provider:
        src = self.sources()
        settings = resolve_settings(model, sources=src)
        problem = setup_error(settings, src)
        self.publish(settings, problem.message if problem else "", again=False)
        if problem is not None:
            return UnusableProvider(settings.model, problem, settings.provider)
        providers = json.dumps(src.providers, sort_keys=True, default=str)
        key = (
            settings.model,
            settings.provider,
            settings.base_url,
            settings.wire,
            key_fingerprint(settings.api_key),
            providers,
        )
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        built = build_provider(
            model,
            home=self.home,
            config=src.config,
            dotenv=src.dotenv,
            on_event=self.on_event,
            sleep=self.sleep,
        )
        log.info(
            "provider for %s: %s at %s (key %s)",
            settings.model,
            settings.provider,
            settings.base_url,
            settings.key_source or "not set",
        )
        with self._lock:
            self._cache[key] = built
            while len(self._cache) > MAX_CACHED:
                self._cache.popitem(last=False)
        return built

    def publish(self, settings: ProviderSettings, problem: str = "", *, again: bool = True) -> dict[str, Any]:
        """Write what this process resolved to ``run/providers.json`` (best effort, atomic). ``again=False``
        (a turn's lookup): not when the file already says the same (a read, not a write and a rename per
        turn); ``describe`` (start, ``geode reload``) always writes, with a new ``at``."""
        view = settings_view(settings, problem)
        body = {**view, "pid": os.getpid(), "by": self.who, "at": time.time()}
        path = self.home.run_dir / STATUS_FILE
        if not again and _says(path, view):
            return body
        tmp = path.with_name(f".{STATUS_FILE}.{os.getpid()}.{threading.get_ident()}")
        try:
            tmp.write_text(json.dumps(body))
            os.replace(tmp, path)
        except OSError as exc:
            log.debug("could not write %s: %s", path, exc)
        return body


def _says(path: Any, view: dict[str, Any]) -> bool:
    try:
        current = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(current, dict) and all(current.get(k) == v for k, v in view.items())


def daemon_view(home: GeodeHome) -> dict[str, Any] | None:
    """What the running daemon last resolved (``run/providers.json``), or None."""
    try:
        return json.loads((home.run_dir / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return None
