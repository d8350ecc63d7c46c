"""`geode ask` with nobody to ask (no terminal, or ``--json``): approvals are answered "nobody could be asked"
(never a person's "no"), and the command exits ``EXIT_NO_APPROVER`` naming the tools and how to allow them."""

from __future__ import annotations

from typing import Any

from actors.cli.client import NO_ONE
from geode.visible_text import visible

EXIT_NO_APPROVER = 77  # sysexits' EX_NOPERM: a call needed approval and nobody could be asked


class Unasked:
    """The approval callback of a `geode ask` that cannot ask: records each tool it could not ask about."""

    def __init__(self, why: str) -> None:
        self.why = why  # "no terminal" | "--json does not ask"
        self.tools: list[str] = []

    def __call__(self, data: dict[str, Any]) -> str:
        name = visible(str(data.get("tool_name") or "?"), one_line=True)[:128]
        if name not in self.tools:
            self.tools.append(name)
        return NO_ONE

    def exit_code(self, code: int) -> int:
        """``code`` (the turn's), or ``EXIT_NO_APPROVER`` when a call went unasked and the turn was not
        cancelled nor left running."""
        return EXIT_NO_APPROVER if self.tools and code in (0, 1) else code

    def message(self) -> str:
        """One stderr line per tool: the reason and the ways to allow it."""
        from geode.tools.approvals import ways_to_allow  # the config schema and hooks: only when it is said

        return "\n".join(
            f"geode: {tool} needed approval and nobody could be asked ({self.why}); it was not run. "
            f"To allow it: {ways_to_allow(tool)}."
            for tool in self.tools
        )
