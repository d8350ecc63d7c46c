"""Terminal rendering of a turn's stream for the thin CLI, and the approval prompt."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

from actors.cli import wire_data as lanes_msg
from geode.visible_text import visible

if TYPE_CHECKING:
    from actors.cli.spinner import Spinner

CATEGORY = {
    "write": "write",
    "mutate": "write",
    "dangerous": "bash",
    "execute": "bash",
    "mcp": "mcp",
    "communicate": "message",
    "administrative": "admin",
    "cost": "expensive",
}


class Renderer:
    """Streams text deltas, one line per tool start/end; collects tool calls for ``--json``.

    With a ``spinner`` (a terminal only), the spinner line is erased before anything is written and stays
    hidden while a text line is open or an approval question is asked."""

    def __init__(
        self, out: TextIO | None = None, *, quiet: bool = False, spinner: Spinner | None = None
    ) -> None:
        self.out = out or sys.stdout
        self.quiet = quiet
        self.spinner = None if quiet else spinner
        self.tool_calls: list[dict[str, Any]] = []
        self._midline = False
        self.streamed = False
        self.output_tokens = 0

    def __call__(self, ev: dict[str, Any]) -> None:
        kind, data = ev.get("kind"), ev.get("data") or {}
        if kind == "tool_start":
            self.tool_calls.append({"id": data.get("id"), "name": data.get("name"), "error": None})
        if kind == "tool_end":
            for call in self.tool_calls:
                if call["id"] == data.get("id"):
                    call["error"] = data.get("error")
        if self.quiet:
            return
        if self.spinner is not None:
            self._track(kind, data)
        if kind == "text_delta":
            text = visible(str(data.get("text", "")))  # model text: no control character reaches the terminal
            self.streamed = True
            if self.spinner is not None:
                self.spinner.hold(True)  # erased now, and not drawn again on this open line
            self._write(text)
            self._midline = not text.endswith("\n")
            if self.spinner is not None and not self._midline:
                self.spinner.hold(False)
        elif kind == "tool_start":
            args = visible(str(data.get("args_preview", "")), one_line=True)[:120]
            self._line(f"⏺ {visible(str(data.get('name')), one_line=True)}({args})")
        elif kind == "tool_end":
            self._line(tool_end_line(data))
        elif kind == lanes_msg.TURN_QUEUED and data.get("position"):
            self._line(f"· queued behind {data['position']} turn(s)")
        elif kind == "llm_retry" and data.get("message"):  # ready: retrying in 1.2 s (…, attempt 1/3)
            self._line(f"· {visible(str(data['message']), one_line=True)}")

    def _track(self, kind: Any, data: dict[str, Any]) -> None:
        """Tokens for the spinner; hide it during an approval question, show it again after."""
        assert self.spinner is not None
        if kind == "tokens":
            self.output_tokens += int(data.get("output") or 0)
            self.spinner.tokens = self.output_tokens or None
        self.spinner.hold(kind == lanes_msg.APPROVAL_REQUEST or self._midline)

    def _write(self, s: str) -> None:
        if self.spinner is None:
            self.out.write(s)
            self.out.flush()
            return
        with self.spinner.lock:
            self.spinner.clear()
            self.out.write(s)
            self.out.flush()

    def _line(self, s: str) -> None:
        if self._midline:
            self._write("\n")
            self._midline = False
        self._write(s + "\n")
        if self.spinner is not None:
            self.spinner.hold(False)

    def ask(self, data: dict[str, Any]) -> str:
        """The approval prompt (:func:`ask_terminal`); once it is answered the spinner shows again while the
        tool runs. Ctrl-C there propagates: the client cancels the turn."""
        answer = ask_terminal(data)
        if self.spinner is not None and not self._midline:
            self.spinner.hold(False)
        return answer

    def end(self) -> None:
        if self.spinner is not None:
            self.spinner.stop()
        if self._midline and not self.quiet:
            self._write("\n")
        self._midline = False


def tool_end_line(data: dict[str, Any]) -> str:
    """``⎿ read_file · read 12 lines`` / ``⎿ write_file ✗ hook_blocked · <the hook's reason>``."""
    name = visible(str(data.get("name")), one_line=True)
    summary = visible(" ".join(str(data.get("summary") or "").split()), one_line=True)[:160]
    if data.get("error"):
        error = visible(str(data["error"]), one_line=True)
        return f"  ⎿ {name} ✗ {error}" + (f" · {summary}" if summary else "")
    return f"  ⎿ {name} · {summary}" if summary else f"  ⎿ {name} ok"


_DENY = re.compile(r"^(?:n|no)(?:\s*[:,-]\s*|\s+)(?P<why>\S.*)$", re.IGNORECASE)
MAX_ASKS = 20  # then the answer is a deny (a runaway stdin never loops forever)
BAR = "  │ "


def parse_answer(line: str, *, sensitive: bool = False) -> str | None:
    """``y``/``a``/``n``, or ``n: <reason>`` (a denial with the person's reason); None when not an answer.
    An empty answer (Enter) denies."""
    answer = line.strip()
    low = answer.lower()
    if low in ("y", "yes"):
        return "y"
    if low in ("a", "always"):
        return None if sensitive else "a"
    if low in ("", "n", "no"):
        return "n"
    m = _DENY.match(answer)
    if m:
        return "n: " + " ".join(m.group("why").split())[:500]
    return None


def request_lines(detail: str, width: int) -> list[str]:
    """The whole request, control characters escaped, hard-wrapped at ``width`` columns (never cut)."""
    width = max(20, width - len(BAR) - 1)  # never the last column: a full line would join the next
    out: list[str] = []
    for line in visible(detail).expandtabs(4).split("\n"):
        out += [BAR + line[i : i + width] for i in range(0, len(line), width)] or [BAR.rstrip()]
    return out


def ask_terminal(data: dict[str, Any], *, stdin: TextIO | None = None, out: TextIO | None = None) -> str:
    """``◆ Approval · tool (category)``, the whole request, what "always" covers, then
    ``y allow · n deny · a always`` (no "always" when it is not offered). Enter denies.

    Anything else asks again; ``n: <reason>`` denies and the reason reaches the model. Ctrl-C is not an
    answer: it propagates (the turn is cancelled, as the chat's header says).
    """
    stdin, out = stdin or sys.stdin, out or sys.stderr
    level = str(data.get("safety_level", "write"))  # e.g. "mutate/public", "execute/public", "read/personal"
    effect, _, data_class = level.partition("/")
    covers = visible(str(data.get("always_covers", "")), one_line=True)
    sensitive = level == "sensitive" or data_class == "personal" or not covers
    name = visible(str(data.get("tool_name")), one_line=True)
    out.write(f"\n◆ Approval · {name} ({CATEGORY.get(effect, visible(effect, one_line=True))})\n")
    detail = str(data.get("detail", ""))
    if detail:
        import shutil  # only here (an approval's request): `geode ask` without one never loads it

        width = shutil.get_terminal_size((100, 24)).columns
        out.write(f"  the whole request ({len(detail)} characters):\n")
        out.write("\n".join(request_lines(detail, width)) + "\n")
    if not sensitive:
        out.write(f"  a always covers: {covers}\n")
    choices = "y allow this request · n deny" if sensitive else "y allow · n deny · a always"
    for _ in range(MAX_ASKS):
        out.write(f"  {choices} (Enter denies; n: why, to tell the model) > ")
        out.flush()
        try:
            line = stdin.readline()
        except KeyboardInterrupt:
            out.write("\n")
            out.flush()
            raise
        except EOFError:
            return "n"
        if not line:
            return "n"
        decision = parse_answer(line, sensitive=sensitive)
        if decision is not None:
            return decision
        allowed = "y, n or n: <reason>" if sensitive else "y, a, n or n: <reason>"
        shown = visible(line.strip()[:40], one_line=True)
        out.write(f"  ? {shown!r} is not an answer: type {allowed}\n")
    return "n"
