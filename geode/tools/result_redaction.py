"""Tool results masked before the model, the receipts and the timeline see them: the known secret shapes
(``geode.redaction.SHAPES``) and the literal values of the home's ``.env`` and of the daemon's secret-named
environment variables, each replaced by ``[REDACTED:<what>]`` and counted in the result (``redacted``)."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from geode.home import GeodeHome
from geode.redaction import SHAPES, is_secret_key, mask_secrets
from geode.secret_screen import Screen
from geode.tools.spec import ToolResult
from geode.tools.structured_text import carried, carry, expand

MIN_LITERAL = 8  # shorter values ("1", "true", a port) would mask ordinary text
MAX_DEPTH = 32
_SCREEN = Screen(SHAPES)  # mask_secrets' own screen: a string it rules out, holding no literal, is kept


class ResultRedactor:
    """Masks one result at a time; the ``.env`` is re-read when it changed (same key the providers use)."""

    def __init__(self, home_root: Path | None = None, environ: Mapping[str, str] | None = None) -> None:
        self._home = GeodeHome(home_root) if home_root is not None else GeodeHome.from_env()
        self._env_file = str(self._home.env_file)  # stat'ed per result: its text, worked out once
        self._environ = os.environ if environ is None else environ
        self._mu = threading.Lock()
        self._stamp: tuple[int, int, int] | bool | None = False  # False: not read yet
        self._literals: list[tuple[str, str]] = []

    def literals(self) -> list[tuple[str, str]]:
        """``(label, value)`` pairs, longest value first: ``.env`` values, then secret-named variables'.
        Worked out again only when the ``.env`` changed (one ``stat`` per result otherwise)."""
        try:
            st = os.stat(self._env_file)
            stamp: tuple[int, int, int] | None = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            stamp = None
        with self._mu:
            if stamp != self._stamp:
                self._literals = self._collect(stamp is not None)
                self._stamp = stamp
            return self._literals

    def _collect(self, dotenv_exists: bool) -> list[tuple[str, str]]:
        try:
            dotenv = self._home.load_dotenv() if dotenv_exists else {}
        except (OSError, UnicodeDecodeError):
            dotenv = {}
        found: dict[str, str] = {}
        for name, value in dotenv.items():
            found.setdefault(value, f"env:{name}")
        for name, value in self._environ.items():
            if is_secret_key(name):
                found.setdefault(value, f"env:{name}")
        pairs = [(label, v) for v, label in found.items() if len(v) >= MIN_LITERAL]
        return sorted(pairs, key=lambda p: -len(p[1]))

    def apply(self, result: ToolResult) -> ToolResult:
        """``result`` with its secrets masked; a dict result also says how many of each (``redacted``)."""
        counts: Counter[str] = Counter()
        text = carried(result.content)  # an MCP structured result's JSON text: masked as the object it holds
        content = _mask(
            result.content if text is None else expand(result.content), self.literals(), counts, 0
        )
        if not counts:
            return result
        if isinstance(content, dict):
            content["redacted"] = dict(sorted(counts.items()))
        if text is not None and isinstance(content, dict):
            content = carry(content)
        return result.model_copy(update={"content": content})


def _mask(obj: Any, literals: list[tuple[str, str]], counts: Counter[str], depth: int) -> Any:
    if isinstance(obj, str):
        for _, value in literals:
            if value in obj:
                break
        else:  # what mask_secrets would find nothing in (most strings): no call, no Counter made for it
            if not _SCREEN.maybe(obj):
                return obj
        text, found = mask_secrets(obj, literals)
        if found:  # most strings hold none: no Counter.update of nothing per string
            counts.update(found)
        return text
    if depth >= MAX_DEPTH:
        return obj
    if isinstance(obj, dict):
        return {k: _mask(v, literals, counts, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_mask(v, literals, counts, depth + 1) for v in obj]
    return obj
