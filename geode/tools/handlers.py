"""The handler contract: what a tool implementation receives (ToolEnv) and how it reports failure."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from geode.records.models import Observation
from geode.tools.spec import ToolContext


class ToolFailure(Exception):
    """A clean, handler-declared failure: the effect did not happen (or is fully described by the message)."""

    def __init__(self, message: str, error_type: str = "tool_error", **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type
        self.extra = extra


@dataclass(frozen=True)
class ToolEnv:
    """Everything a handler may use besides its arguments. ``cancel`` is set when the deadline passes."""

    ctx: ToolContext
    workspace: Path
    roots: tuple[Path, ...]
    deadline_s: float
    cancel: threading.Event = field(default_factory=threading.Event)
    services: Mapping[str, Any] = field(default_factory=dict)  # messengers, delegate, display ...
    # what a handler works out once per call (its file boundary: geode/tools/builtin/files.py)
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def service(self, name: str) -> Any:
        return self.services.get(name)


class Handler(Protocol):
    """A tool implementation: returns a JSON-able value (a dict is preferred) or raises ToolFailure."""

    def __call__(self, args: dict[str, Any], env: ToolEnv) -> Any: ...


@dataclass(frozen=True)
class HandlerEntry:
    """A registered handler plus what the executor must know about its arguments before dispatch.

    ``path_args`` name arguments holding file-system paths (checked against the allowed roots by policy).
    ``deadline`` may derive a per-call deadline from the arguments (e.g. run_bash's own timeout).
    ``observe`` works out, before the handler runs, what its effect would leave (recorded at admission to
    settle an unknown outcome by looking; geode/tools/observation.py).
    ``inline``: bounded read-only work that checks ``env.cancel.is_set()`` as it goes (a walk): a call that
    needs no receipt runs it on the calling thread, the deadline seen by those checks (tools/dispatch.py).
    No argument shape skips the human prompt: only a person, a hook or the policy decide (docs/security.md).
    """

    fn: Handler
    path_args: tuple[str, ...] = ()
    deadline: Callable[[dict[str, Any]], float] | None = None
    observe: Callable[[dict[str, Any], Path, tuple[Path, ...]], Observation | None] | None = None
    inline: bool = False
