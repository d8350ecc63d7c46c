"""Child specs and tree settings in OTP vocabulary: restart, shutdown, strategy, intensity, backoff."""

from __future__ import annotations

import random
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

    def restarts_after(self, exit_code: int) -> bool:
        if self.restart == "permanent":
            return True
        return self.restart == "transient" and exit_code != 0


@dataclass(frozen=True)
class TreeConfig:
    """Tree-wide settings. Defaults (and why):

    * ``intensity=10`` restarts within ``period_s=60``: every child of a 7-child tree may crash once or
      twice without taking the tree down, while a crash loop (backoff 0.2 s doubling to 5 s) escalates
      in about half a minute, so supervisord/systemd sees a failing daemon quickly.
    * first restart after a stable run is immediate (restart latency); later consecutive failures back
      off ``backoff_base_s * 2**(n-2)`` capped at ``backoff_max_s``, with ±``backoff_jitter`` randomisation.
    * a child counts as stable again after ``stable_s`` of running.
    """

    strategy: Strategy = "one_for_one"
    intensity: int = 10
    period_s: float = 60.0
    backoff_base_s: float = 0.2
    backoff_max_s: float = 5.0
    backoff_jitter: float = 0.2
    stable_s: float = 10.0
    ready_timeout_s: float = 20.0

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
        if cfg.intensity < 0 or cfg.period_s <= 0:
            raise ConfigError("[supervisor] intensity must be >= 0 and period_s > 0")
        return cfg
