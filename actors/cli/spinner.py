"""The chat's "working" line: a spinner with the elapsed time (and output tokens when known) while the model
works, drawn on a terminal only and erased before any text or tool line is written."""

from __future__ import annotations

import threading
import time
from typing import TextIO

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
CLEAR = "\r\x1b[2K"  # back to column 0, erase the line
EVERY_S = 0.1


def spinner_line(frame: int, elapsed_s: float, tokens: int | None) -> str:
    """``⠋ working · 3.2 s · 120 tokens · Ctrl-C cancels``."""
    tok = f" · {tokens} tokens" if tokens else ""
    return f"{FRAMES[frame % len(FRAMES)]} working · {elapsed_s:.1f} s{tok} · Ctrl-C cancels"


class Spinner:
    """Thread-safe. ``start()`` draws every ``every_s`` on its own thread until ``stop()``; writers take
    ``lock`` and call ``clear()`` first (``Renderer`` does), and ``hold(True)`` keeps it hidden (a text
    line is open, or an approval question is on screen)."""

    def __init__(self, out: TextIO, *, every_s: float = EVERY_S) -> None:
        self.out, self.every_s = out, every_s
        self.lock = threading.RLock()
        self.tokens: int | None = None
        self._t0 = time.monotonic()
        self._shown = False
        self._held = False
        self._frame = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Spinner:
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="cli-spinner", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(1.0)
        with self.lock:
            self.clear()

    def hold(self, held: bool) -> None:
        with self.lock:
            self._held = held
            if held:
                self.clear()

    def clear(self) -> None:
        """Erase the spinner line if it is drawn (callers hold ``lock``)."""
        with self.lock:
            if self._shown:
                self._emit(CLEAR)
                self._shown = False

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            with self.lock:
                if self._held or self._stop.is_set():
                    continue
                line = spinner_line(self._frame, time.monotonic() - self._t0, self.tokens)
                self._frame += 1
                self._emit(CLEAR + line)
                self._shown = True

    def _emit(self, s: str) -> None:
        try:
            self.out.write(s)
            self.out.flush()
        except (OSError, ValueError):  # the terminal went away: stop drawing
            self._stop.set()
