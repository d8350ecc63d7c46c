"""The shell's sections of ``config.toml`` (``[supervisor]``, ``[bus]``, ``[loop] workers``) and its check."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from actors.tree.children import DEFAULT_LOOP_WORKERS, child_names, tree_specs
from actors.tree.spec import Restart, TreeConfig
from geode.config_check import ConfigReport, check_file, domain_validators, merge_schemas
from geode.config_schema import DOMAIN_SCHEMAS
from geode.home import GeodeHome


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
    model_config = ConfigDict(extra="forbid")
    public_key: str = ""
    secret_key: str = ""
    allowed_clients: list[str] = Field(default_factory=list)


class BusSection(BaseModel):
    """``[bus]`` (read by ``actors/bus/endpoints.py``)."""

    workers: int = Field(default=4, ge=1)
    tcp: dict[str, str] = Field(default_factory=dict)
    curve: CurveSection = CurveSection()


SHELL_SCHEMAS: dict[str, list[Any]] = {
    "supervisor": [TreeConfig, SupervisorChildren],
    "bus": [BusSection],
    "loop": [LoopTreeSection],
}
SCHEMAS = merge_schemas(DOMAIN_SCHEMAS, SHELL_SCHEMAS)


def check_home_config(home: GeodeHome) -> ConfigReport:
    """Check ``$GEODE_HOME/config.toml`` with every schema and the loaders that refuse bad entries."""
    validators = [*domain_validators(), TreeConfig.from_config, tree_specs, child_names]
    return check_file(home.config_file, schemas=SCHEMAS, validators=validators)
