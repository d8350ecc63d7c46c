"""The shell's sections of ``config.toml`` (``[supervisor]``, ``[bus]``, ``[loop] workers``), the typed config
every process builds (:class:`TreeSettings`), and the one start-up check of ``serve`` and ``--repl``."""

from __future__ import annotations

import dataclasses
import sys
import typing
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict, Field, create_model

from actors.tree.spec import Restart, TreeConfig
from geode.config_check import ConfigReport, check_file, domain_validators, merge_schemas
from geode.config_schema import DOMAIN_SCHEMAS, GeodeConfig, LoopSection
from geode.home import GeodeHome

DEFAULT_LOOP_WORKERS = 2
EXIT_CONFIG = 78  # EX_CONFIG: what `geode serve` and `geode --repl` exit with on a refused config


class ChildOverride(BaseModel):
    """``[supervisor.children.<name or kind>]``."""

    model_config = ConfigDict(extra="forbid")
    restart: Restart = "permanent"
    shutdown_ms: int = Field(default=3000, ge=0)


class SupervisorChildren(BaseModel):
    children: dict[str, ChildOverride] = Field(default_factory=dict)


class LoopTreeSection(BaseModel):
    """``[loop]`` keys the shell reads: how many loop children, and turns per child."""

    workers: int = Field(default=DEFAULT_LOOP_WORKERS, ge=1, le=64)
    capacity: int = Field(default=2, ge=1)


class CurveSection(BaseModel):
    """``[bus.curve]``: ``authorized_keys`` (worker hosts' public keys) may connect over tcp; this host's
    own pair is read from ``$GEODE_HOME/keys/`` (``geode keys init``), which wins over the older inline
    ``public_key`` / ``secret_key``."""

    model_config = ConfigDict(extra="forbid")
    public_key: str = ""
    secret_key: str = ""
    allowed_clients: list[str] = Field(default_factory=list)
    authorized_keys: list[str] = Field(default_factory=list)


class BusSection(BaseModel):
    """``[bus]`` (read by ``actors/bus/endpoints.py``)."""

    workers: int = Field(default=4, ge=1)
    listen: str = ""  # "tcp://0.0.0.0:7700": lanes, store, executor also bind port, port+1, port+2 (CURVE)
    tcp: dict[str, str] = Field(default_factory=dict)
    curve: CurveSection = CurveSection()


_TREE_HINTS = typing.get_type_hints(TreeConfig)
_SupervisorBase = create_model(  # type: ignore[call-overload]
    "_SupervisorBase",
    __base__=SupervisorChildren,
    **{f.name: (_TREE_HINTS[f.name], f.default) for f in dataclasses.fields(TreeConfig)},
)


class SupervisorSection(_SupervisorBase):  # type: ignore[misc, valid-type]
    """``[supervisor]``: the tree settings (defaults in :class:`TreeConfig`) and per-child overrides."""

    @property
    def tree(self) -> TreeConfig:
        return TreeConfig.from_config({"supervisor": self.model_dump(exclude={"children"})})


class LoopShellSection(LoopSection, LoopTreeSection):  # type: ignore[misc, valid-type]
    """``[loop]`` as a whole: the turn bounds (``LoopSettings``) and the shell's workers/capacity."""


class TreeSettings(GeodeConfig):
    """The typed config of a GEODE process: the domain's sections and the shell's."""

    loop: LoopShellSection = LoopShellSection()
    supervisor: SupervisorSection = SupervisorSection()
    bus: BusSection = BusSection()


SHELL_SCHEMAS: dict[str, list[Any]] = {
    "supervisor": [TreeConfig, SupervisorChildren],
    "bus": [BusSection],
    "loop": [LoopTreeSection],
}
SCHEMAS = merge_schemas(DOMAIN_SCHEMAS, SHELL_SCHEMAS)


def check_home_config(home: GeodeHome) -> ConfigReport:
    """Check ``$GEODE_HOME/config.toml`` with every schema and the loaders that refuse bad entries."""
    validators = [*domain_validators(), TreeConfig.from_config, TreeSettings.from_raw]
    return check_file(home.config_file, schemas=SCHEMAS, validators=validators)


def start_settings(
    home: GeodeHome, *, prog: str, err: TextIO | None = None
) -> tuple[TreeSettings | None, ConfigReport]:
    """The one start-up check of ``geode serve`` and ``geode --repl``: warnings and errors go to ``err``
    one line each (``<prog>: ...``); refused (None) when any error, else the typed sections to build from."""
    out = sys.stderr if err is None else err
    report = check_home_config(home)
    for line in report.warnings:
        print(f"{prog}: warning: {line}", file=out)
    if not report.ok:
        for line in report.errors:
            print(f"{prog}: {line}", file=out)
        print(f"{prog}: refusing to start; no child was started", file=out)
        return None, report
    return TreeSettings.from_raw(report.config), report
