"""`geode ask --output-format stream-json`: the turn as it runs, one JSON object per line on stdout.

Modelled on Claude Code's stream-json: a ``system``/``init`` line first, ``stream_event`` lines carrying the
text deltas, an ``assistant`` line per content block (the text said before a tool call, each ``tool_use``),
a ``user`` line per ``tool_result``, ``system`` lines for approvals asked and answered, queueing, retries
and fallbacks; the last line is the `geode ask --json` object of the same turn (actors/cli/ask_json.py) with
``"type": "result"``. Every line is flushed as it is written. Field by field: docs/stream-json.md.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from actors.cli import wire_data as lanes_msg
from actors.cli.client import NO_ONE, ApprovalFn

FORMATS = ("text", "json", "stream-json")
DECISIONS = {"y": "allow", "a": "always", "n": "deny"}
# turn event kinds said as a ``system`` line (subtype, the data fields kept)
SYSTEM_KINDS = {
    lanes_msg.TURN_QUEUED: ("queued", ("position",)),  # only behind other turns (position > 0)
    "llm_retry": ("api_retry", ("attempt", "error_kind", "message")),
    "retry_wait": ("retry_wait", ("seconds", "attempt")),
    "fallback": ("fallback", ("from_model", "to_model")),
}


def open_stream(output_format: str) -> StreamJson | None:
    """The stream for ``--output-format stream-json``; None for text and json. Another value is a usage
    error (exit 2), said in one line before anything is sent."""
    if output_format not in FORMATS:
        import typer

        typer.echo(
            f"geode: --output-format must be one of {', '.join(FORMATS)} (not {output_format!r})", err=True
        )
        raise typer.Exit(2)
    return StreamJson() if output_format == "stream-json" else None


class StreamJson:
    """The ``on_event`` of ``ClientConnection.run_prompt`` writing stream-json lines to ``out``."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.session_id: str | None = None
        self._text: list[str] = []  # text deltas since the last assistant text line
        self._turn: str | None = None
        self._closed = False

    def start(self, cl: Any, approve: ApprovalFn, *, skip: bool) -> StreamJson:
        """The ``init`` line for the connected client ``cl``; returns the stream (the turn's ``on_event``)."""
        from actors.cli.unasked import Unasked

        asks = "skip" if skip else "nobody" if isinstance(approve, Unasked) else "terminal"
        self.init(cl.welcome, cl.session_id, cwd=os.getcwd(), asks=asks)
        return self

    def init(self, welcome: dict[str, Any], session_id: str | None, *, cwd: str, asks: str) -> None:
        """The first line: which session, model, provider and workspace the turn runs with; ``asks``
        says who answers approvals ("terminal", "nobody" or "skip": every call approved)."""
        self.session_id = session_id
        self.emit(
            {
                "type": "system",
                "subtype": "init",
                "session_id": session_id,
                "model": welcome.get("model"),
                "provider": welcome.get("provider"),
                "workspace": welcome.get("workspace"),
                "cwd": cwd,
                "approvals": asks,
                "geode_version": welcome.get("server_version"),
            }
        )

    def __call__(self, ev: dict[str, Any]) -> None:
        kind, data = ev.get("kind"), ev.get("data") or {}
        self._turn = ev.get("turn_id") or self._turn
        if kind == "text_delta":
            text = str(data.get("text", ""))
            self._text.append(text)
            delta = {"type": "content_block_delta", "delta": {"type": "text_delta", "text": text}}
            self.emit({"type": "stream_event", "event": delta})
        elif kind == "tool_start":
            self.flush_text()
            preview = str(data.get("args_preview", ""))
            parsed = _input(preview)
            use = {"type": "tool_use", "id": data.get("id"), "name": data.get("name"), "input": parsed}
            line = {"type": "assistant", "message": {"role": "assistant", "content": [use]}}
            self.emit(line if parsed is not None else {**line, "input_preview": preview})
        elif kind == "tool_end":
            error = data.get("error")
            block = {
                "type": "tool_result",
                "tool_use_id": data.get("id"),
                "content": str(data.get("summary") or ""),
                "is_error": bool(error),
            }
            extra = {"tool_name": data.get("name"), "error": error, "duration_s": data.get("duration_s")}
            self.emit({"type": "user", "message": {"role": "user", "content": [block]}, **extra})
        elif kind == lanes_msg.APPROVAL_REQUEST:
            self.flush_text()
            fields = ("approval_id", "tool_name", "safety_level", "detail", "always_covers", "timeout_s")
            self.emit({"type": "system", "subtype": "approval_request", **{k: data.get(k) for k in fields}})
        elif kind in SYSTEM_KINDS and (kind != lanes_msg.TURN_QUEUED or data.get("position")):
            subtype, keep = SYSTEM_KINDS[kind]
            self.emit({"type": "system", "subtype": subtype, **{k: data.get(k) for k in keep}})
        elif kind == lanes_msg.TURN_DONE:
            self.flush_text()

    def approver(self, ask: ApprovalFn) -> ApprovalFn:
        """``ask`` (the terminal, or nobody) with its answer written as an ``approval_response`` line."""

        def answered(data: dict[str, Any]) -> str:
            answer = ask(data)
            decision, _, note = answer.partition(":")
            said = "unasked" if answer == NO_ONE else DECISIONS.get(decision.strip(), "deny")
            line = {"type": "system", "subtype": "approval_response", "approval_id": data.get("approval_id")}
            line |= {"tool_name": data.get("tool_name"), "decision": said}
            self.emit(line | ({"note": note.strip()} if note.strip() and said == "deny" else {}))
            return answer

        return answered

    def flush_text(self) -> None:
        """The text streamed since the last content block, as one ``assistant`` text line."""
        text, self._text = "".join(self._text), []
        if text:
            content = [{"type": "text", "text": text}]
            self.emit({"type": "assistant", "message": {"role": "assistant", "content": content}})

    def result(self, answer: dict[str, Any]) -> None:
        """The last line: the `--json` object of the turn plus ``"type": "result"``."""
        self.flush_text()
        self.emit({"type": "result", **answer})

    def emit(self, line: dict[str, Any]) -> None:
        """One line, flushed; a reader that went away (a closed pipe) ends the output, not the turn.
        Every line but the result (whose ids are the answer's own) carries the session and turn ids."""
        if line["type"] != "result":
            line = {**line, "session_id": self.session_id}
            if self._turn:
                line["turn_id"] = self._turn
        if self._closed:
            return
        try:
            self.out.write(json.dumps(line) + "\n")
            self.out.flush()
        except BrokenPipeError:
            self._closed = True
            try:  # nothing more reaches the reader; interpreter exit must not flush into the closed pipe
                os.dup2(os.open(os.devnull, os.O_WRONLY), self.out.fileno())
            except (OSError, ValueError):
                pass


def _input(preview: str) -> Any:
    """The call's input when its preview is the whole JSON object (previews stop at 200 characters);
    else None (the line then carries the cut ``input_preview``)."""
    try:
        return json.loads(preview)
    except ValueError:
        return None
