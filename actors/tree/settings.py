"""``[supervisor]`` (the tree settings, per-child overrides) and the shell's ``[loop]`` keys (workers,
capacity): the supervisor tree's sections and their defaults, a shell leaf."""

from __future__ import annotations

import dataclasses
import typing

from pydantic import BaseModel, ConfigDict, Field, create_model

from actors.tree.spec import Restart, TreeConfig
from geode.loop.settings import LoopSection

DEFAULT_LOOP_WORKERS = 2
DEFAULT_LOOP_CAPACITY = 2  # turns one loop child runs at once
DEFAULT_SHUTDOWN_MS = 3000  # SIGTERM grace before SIGKILL of a child without its own shutdown_ms
CHILD_SHUTDOWN_MS = {"store": 5000, "lanes": 5000}  # the durable writers get longer to flush


class ChildOverride(BaseModel):
    """``[supervisor.children.<name or kind>]``."""

    model_config = ConfigDict(extra="forbid")
    restart: Restart = "permanent"
    shutdown_ms: int = Field(default=DEFAULT_SHUTDOWN_MS, ge=0)


class SupervisorChildren(BaseModel):
    children: dict[str, ChildOverride] = Field(default_factory=dict)


class LoopTreeSection(BaseModel):
    """``[loop]`` keys the shell reads: how many loop children, and turns per child."""

    workers: int = Field(default=DEFAULT_LOOP_WORKERS, ge=1, le=64)
    capacity: int = Field(default=DEFAULT_LOOP_CAPACITY, ge=1)


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
