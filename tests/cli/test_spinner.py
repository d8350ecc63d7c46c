"""The chat's spinner line: drawn while nothing is written, erased before streamed text and tool lines,
hidden while a text line is open or an approval is asked, and it counts the output tokens it hears of."""

from __future__ import annotations

import io
import threading

from actors.cli.render import Renderer
from actors.cli.spinner import CLEAR, Spinner, spinner_line
from tests.waiting import poll_for


class _Out(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def write(self, s: str) -> int:
        with self.lock:
            return super().write(s)

    def text(self) -> str:
        with self.lock:
            return self.getvalue()


def test_spinner_line() -> None:
    assert spinner_line(0, 3.24, None) == "⠋ working · 3.2 s · Ctrl-C cancels"
    assert spinner_line(1, 0.0, 120) == "⠙ working · 0.0 s · 120 tokens · Ctrl-C cancels"


def test_the_spinner_is_erased_before_text_and_held_while_a_line_is_open() -> None:
    out = _Out()
    sp = Spinner(out, every_s=0.01).start()
    r = Renderer(out, spinner=sp)
    try:
        poll_for(lambda: "working ·" in out.text(), 5.0, what="the spinner")
        r({"kind": "tokens", "data": {"output": 42}})
        poll_for(lambda: "42 tokens" in out.text(), 5.0, what="the token count")
        r({"kind": "text_delta", "data": {"text": "hello"}})
        text = out.text()
        assert text.endswith(CLEAR + "hello"), repr(text[-80:])  # erased, then the text
        mark = len(text)
        r({"kind": "text_delta", "data": {"text": " world"}})
        r({"kind": "approval", "data": {}})  # held: an open text line, then an approval question
        r({"kind": "tool_start", "data": {"name": "read_file", "args_preview": "a.txt"}})
        assert out.text()[mark:].startswith(" world\n⏺ read_file(a.txt)\n")  # no spinner in between
        poll_for(lambda: "working ·" in out.text()[mark:], 5.0, what="the spinner back after the line")
    finally:
        r.end()
    final = out.text()
    assert final.endswith(CLEAR)  # end() leaves no spinner on the screen


def test_no_spinner_when_quiet() -> None:
    out = _Out()
    sp = Spinner(out, every_s=0.01)
    r = Renderer(out, quiet=True, spinner=sp)
    r({"kind": "text_delta", "data": {"text": "x"}})
    r.end()
    assert r.spinner is None and out.text() == ""
