"""The providers a loop worker's turns use: the live ones (the child's config source at each turn) or an
injected factory (cached here); warmed up in the background after ``worker.ready``, described for doctor."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from geode.config_source import ConfigSource
from geode.home import GeodeHome
from geode.loop.events import cancellable_sleep, relay_provider_event
from geode.loop.provider_memo import ProviderMemo
from geode.providers.adapter_base import WireAdapter
from geode.providers.live import LiveProviders
from geode.providers.request_lines import quiet_request_lines
from geode.providers.types import Provider

log = logging.getLogger("actors.loop_worker")
WARM_ENV = "GEODE_WARM_WORKER"  # "0": no background warm-up after ready (scripts/bench/cli_start.py)
ProviderFactory = Callable[[str | None], Provider]


class TurnProviders:
    """A provider per model for the worker ``who``."""

    def __init__(
        self,
        home: GeodeHome,
        who: str,
        factory: ProviderFactory | None = None,
        source: ConfigSource[Any] | None = None,
    ) -> None:
        self.who = who
        quiet_request_lines()  # no INFO line per model request in the worker's log
        self.live: LiveProviders | None = None
        self.memo: ProviderMemo | None = None
        if factory is None:  # the source's snapshot and .env at each turn (see geode.providers.live)
            self.live = LiveProviders(
                home, on_event=relay_provider_event, sleep=cancellable_sleep, who=who, source=source
            )
            self.memo = ProviderMemo(self.live)  # resolved again only when something it depends on changed
        self.factory = factory or self.live.get  # type: ignore[union-attr]
        self._cache: dict[str | None, Provider] = {}
        self._lock = threading.Lock()
        self.warm: threading.Thread | None = None

    def get(self, model: str | None) -> Provider:
        """The live providers follow config and .env (their own cache); an injected factory is cached here."""
        if self.memo is not None:
            return self.memo.get(model)
        with self._lock:
            p = self._cache.get(model)
        if p is None:
            p = self.factory(model)
            with self._lock:
                self._cache[model] = p
        return p

    def start_warm_up(self) -> threading.Thread | None:
        """After ``worker.ready``: build the provider a new session would use (the SDK import and client
        construction, ~1 s cold) on a background thread, so the first turn finds it built. A restarted
        worker forked from a warm zygote only constructs the client. ``GEODE_WARM_WORKER=0`` turns it off."""
        if self.live is None or os.environ.get(WARM_ENV, "1") == "0" or self.warm is not None:
            return None
        self.warm = threading.Thread(target=self._warm_up, name=f"{self.who}-warm-up", daemon=True)
        self.warm.start()
        return self.warm

    def _warm_up(self) -> None:
        t0 = time.monotonic()
        try:
            provider = self.live.get(None)  # type: ignore[union-attr]  # cached: the first turn reuses it
            for p in (provider, getattr(provider, "primary", None), getattr(provider, "inner", None)):
                if isinstance(p, WireAdapter):  # a fallback chain's primary, the Codex provider's adapter
                    _ = p.client  # the SDK import and client construction (built on first use)
        except Exception as exc:  # an unusable config is reported when a turn needs it
            log.info("%s: provider not warmed: %s", self.who, exc)
            return
        log.info("%s: provider warmed in %.2fs", self.who, time.monotonic() - t0)

    def describe(self) -> None:
        """Publish what a new session would use (``run/providers.json``, read by doctor and reload)."""
        if self.live is None:
            return
        try:
            self.live.describe(None)
        except Exception as exc:  # an unusable config is reported when a turn needs it
            log.warning("%s: provider not resolved: %s", self.who, exc)
