"""A loop worker's provider for the next turn without resolving it again when nothing it depends on changed.

``LiveProviders.get`` (geode/providers/live.py) resolves a turn's provider from the process environment, the
config source's ``.env`` and snapshot, every turn: a copy of the environment, the settings resolved, the setup
checked, ``run/providers.json`` read back and compared (~75 µs CPU a turn in-process, a few % of the loop's
CPU per turn at 10 sessions). :class:`ProviderMemo` keeps the last turn's answer and gives it again while

* the model asked for is the same,
* the source's snapshot and ``.env`` are the very same objects (``geode reload`` replaces both),
* the process environment is equal to the copy taken before it was resolved, and
* no model of the answer (the primary and its fallbacks) is an OpenAI model Codex can serve (those depend
  on whether the Codex login file exists: resolved every turn) and it had no setup error.

What the turn would have published stays true: when ``run/providers.json`` changed since (another worker
wrote another model's view, someone removed it), it is published again exactly as ``LiveProviders.get``
does (``again=False``: only when the file does not already say the same).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, replace
from typing import Any

from geode.providers.catalogue import model_info
from geode.providers.live import STATUS_FILE, LiveProviders
from geode.providers.selection import ProviderSettings, resolve_settings, setup_error
from geode.providers.types import Provider

Stamp = tuple[int, int, int] | None  # providers.json's (inode, size, mtime_ns); None: no such file


@dataclass(frozen=True)
class _Answer:
    model: str | None
    snapshot: object
    dotenv: object
    environ: dict[Any, Any]
    provider: Provider
    settings: ProviderSettings
    published: Stamp


def _environ() -> dict[Any, Any] | None:
    data = getattr(os.environ, "_data", None)  # the process environment as it is (no decoding)
    return dict(data) if isinstance(data, dict) else None


def _codex_capable(model: str) -> bool:
    info = model_info(model)
    return info.provider == "openai" and "codex" in info.sources


class ProviderMemo:
    """``get(model)``: the provider ``live.get(model)`` would return, resolved again only when needed."""

    def __init__(self, live: LiveProviders) -> None:
        self.live = live
        self._last: _Answer | None = None
        self._lock = threading.Lock()
        self.resolved = 0  # turns whose provider was resolved (a work count for the tests)

    def get(self, model: str | None) -> Provider:
        src = self.live.source
        snapshot, dotenv = src.snapshot, src.env
        with self._lock:
            last = self._last
        if (
            last is not None
            and last.model == model
            and last.snapshot is snapshot  # identity: a reload builds new ones (never compared deeply)
            and last.dotenv is dotenv
            and last.environ == getattr(os.environ, "_data", None)  # one C-level dict comparison
        ):
            return self._republished(last)
        return self._resolve(model, snapshot, dotenv)

    def _resolve(self, model: str | None, snapshot: object, dotenv: object) -> Provider:
        environ = _environ()  # taken first: a change after it makes the next turn resolve again
        provider = self.live.get(model)
        answer = None
        if environ is not None:
            settings = resolve_settings(model, sources=self.live.sources())
            models = (settings.model, *settings.fallback)
            if setup_error(settings) is None and not any(_codex_capable(m) for m in models):
                answer = _Answer(model, snapshot, dotenv, environ, provider, settings, self._stamp())
        with self._lock:
            self._last = answer
            self.resolved += 1
        return provider

    def _republished(self, last: _Answer) -> Provider:
        stamp = self._stamp()
        if stamp is None or stamp != last.published:  # changed since: publish as a resolution would
            self.live.publish(last.settings, "", again=False)
            with self._lock:
                if self._last is last:
                    self._last = replace(last, published=self._stamp())
        return last.provider

    def _stamp(self) -> Stamp:
        try:
            st = os.stat(self.live.home.run_dir / STATUS_FILE)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)
