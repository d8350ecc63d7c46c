"""Child specs and tree settings in OTP vocabulary: restart, shutdown, strategy, intensity, backoff."""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field
from typing import Any, Literal

from geode.protocol.errors import ConfigError

Restart = Literal["permanent", "transient", "temporary"]
Strategy = Literal["one_for_one", "rest_for_one"]
CHILD_STATES = ("starting", "running", "backoff", "fatal", "stopped")


@dataclass(frozen=True)
class ChildSpec:
    """How to start one child process and what to do when it exits.

    ``restart``: permanent (always), transient (only after an abnormal exit), temporary (never).
    ``shutdown_ms``: grace after SIGTERM before SIGKILL.
    """

    name: str
    argv: tuple[str, ...]
    restart: Restart = "permanent"
    shutdown_ms: int = 3000
    env: dict[str, str] = field(default_factory=dict)
    # it imports SDKs (a loop worker: the provider's; the messengers: its platforms'): forked by the zygote
    # only after it imported them, and started after the other children at the tree's start
    sdks: bool = False

    @property
    def swappable(self) -> bool:
        """A loop worker: the zygote may fork it before the SDKs (ready at once) and the supervisor swaps it,
        once idle, for a fork that carries them (``actors/tree/swaps.py``)."""
        return self.sdks and self.pool == "loop"

    @property
    def forkable(self) -> bool:
        """``python -m actors.tree.child_main NAME`` with our interpreter: the zygote can fork it instead."""
        return self.argv == (sys.executable, "-m", "actors.tree.child_main", self.name)

    def restarts_after(self, exit_code: int) -> bool:
        if self.restart == "permanent":
            return True
        return self.restart == "transient" and exit_code != 0

    @property
    def pool(self) -> str | None:
        """Numbered children of one kind (``loop-1``, ``loop-2``) form a worker pool, else None."""
        base, _, num = self.name.rpartition("-")
        return base if base and num.isdigit() else None


@dataclass(frozen=True)
class TreeConfig:
    """Tree-wide settings. Defaults (and why):

    * a child that reported ready and then dies is restarted at once (availability). The guard is
      ``intensity`` restarts of ONE child within ``period_s``: past it that child is ``fatal`` (logged, shown
      by ``geode status``, restarted only by ``geode restart NAME``) and the rest of the tree keeps serving.
      10 in 10 s is a child dying about every second; a chaos run killing one of 7 children every 0.5 s
      gives each about 3 per 10 s.
    * ``tree_intensity`` restarts of all children within ``tree_period_s`` is a storm: the tree stops
      (exit 1) so supervisord/systemd sees a failing daemon. 40 in 10 s: several children flapping at once.
    * backoff applies only to start failures (the child died before it reported ready, or within
      ``stable_s`` after, like supervisord's ``startsecs``): the first retries at once, later consecutive
      ones wait ``backoff_base_s * 2**(n-2)`` capped at ``backoff_max_s``, ±``backoff_jitter``;
      ``start_retries`` consecutive start failures make the child ``fatal`` (0: never).
    * ``zygote``: children are forked from a fork server that imported their code and the provider SDKs
      once, so a restart takes milliseconds and the tree shares those pages (``GEODE_ZYGOTE=0`` turns it
      off, as does ``zygote = false``; a child the zygote cannot fork is started as its own process).
    * a worker pool (``loop-1..N``) never waits in backoff as a whole: when no member is running or
      starting, the member due first starts at once.
    """

    strategy: Strategy = "one_for_one"
    intensity: int = 10
    period_s: float = 10.0
    tree_intensity: int = 40
    tree_period_s: float = 10.0
    backoff_base_s: float = 0.2
    backoff_max_s: float = 5.0
    backoff_jitter: float = 0.2
    start_retries: int = 10
    stable_s: float = 0.0
    ready_timeout_s: float = 20.0
    zygote: bool = True

    def backoff(self, consecutive_failures: int, rng: random.Random | None = None) -> float:
        if consecutive_failures <= 1:
            return 0.0
        base = min(self.backoff_max_s, self.backoff_base_s * 2 ** (consecutive_failures - 2))
        j = self.backoff_jitter
        return base * (rng or random).uniform(1 - j, 1 + j)

    @classmethod
    def from_config(cls, raw: dict[str, Any]) -> TreeConfig:
        sup = dict(raw.get("supervisor") or {})
        sup.pop("children", None)
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(sup) - known
        if unknown:
            raise ConfigError(f"[supervisor] unknown keys: {', '.join(sorted(unknown))}")
        cfg = cls(**sup)
        if cfg.strategy not in ("one_for_one", "rest_for_one"):
            raise ConfigError(f"[supervisor] strategy must be one_for_one|rest_for_one, not {cfg.strategy!r}")
        if cfg.intensity < 0 or cfg.period_s <= 0 or cfg.tree_intensity < 0 or cfg.tree_period_s <= 0:
            raise ConfigError("[supervisor] intensities must be >= 0 and periods > 0")
        if cfg.start_retries < 0 or cfg.stable_s < 0:
            raise ConfigError("[supervisor] start_retries and stable_s must be >= 0")
        return cfg
