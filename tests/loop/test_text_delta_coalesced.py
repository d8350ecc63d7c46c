"""Streamed text reaches the turn's events coalesced (one ``text_delta`` per ~50 ms, not one per provider
delta, so a fast stream does not flood the bus), the first words at once and every word in order, and text
held back while the stream pauses goes out without waiting for the next delta."""

from __future__ import annotations

import threading
from typing import Any

from geode.protocol.turns import TerminationReason as R
from geode.providers.types import ModelRequest, ModelResponse
from geode.testing.function_model import FunctionModel
from tests.loop.conftest import Rig
from tests.waiting import poll_for


def _texts(rig: Rig) -> list[str]:
    return [str(e.data.get("text")) for e in rig.sink.events if e.kind.value == "text_delta"]


def test_a_fast_stream_is_a_few_events_with_all_the_text(fake_rig: Rig) -> None:
    answer = " ".join(f"word{i}" for i in range(300))
    r = fake_rig.loop(FunctionModel(lambda _req: answer)).run_turn("s", "t", "go")
    assert r.termination_reason == R.NATURAL
    texts = _texts(fake_rig)
    assert "".join(texts) == answer
    assert 1 <= len(texts) <= 10, len(texts)  # 300 deltas in a few ms: not 300 events


class _PausingModel(FunctionModel):
    """Streams a burst, then pauses (until released) before the last word."""

    def __init__(self) -> None:
        super().__init__(lambda _req: "a b c d e f end")
        self.release = threading.Event()

    def complete(self, request: ModelRequest, on_delta: Any = None, **kw: Any) -> ModelResponse:
        response = self._coerce(self.fn(request), request)
        assert on_delta is not None
        for piece in ("a ", "b ", "c ", "d ", "e ", "f "):
            on_delta(piece)
        self.release.wait(10)
        on_delta("end")
        return response


def test_text_held_back_during_a_pause_goes_out_before_the_stream_resumes(fake_rig: Rig) -> None:
    model = _PausingModel()
    out: dict[str, Any] = {}
    th = threading.Thread(target=lambda: out.update(r=fake_rig.loop(model).run_turn("s", "t", "go")))
    th.start()
    try:
        poll_for(lambda: "".join(_texts(fake_rig)) == "a b c d e f ", 5.0, what="the burst's text")
    finally:
        model.release.set()
        th.join(10)
    assert out["r"].termination_reason == R.NATURAL
    assert "".join(_texts(fake_rig)) == "a b c d e f end"
