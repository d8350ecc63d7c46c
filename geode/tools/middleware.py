"""Trusted request middleware: in-process transforms of a call before policy (may rename or rewrite)."""

from __future__ import annotations

from collections.abc import Callable

from geode.tools.spec import ToolCall, ToolContext

RequestMiddleware = Callable[[ToolContext, ToolCall], ToolCall]
