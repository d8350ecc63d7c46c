"""A cancel aborts an in-flight model request: the turn ends ``user_cancelled`` at once, without waiting for
the provider to answer, and the late answer is dropped."""

from __future__ import annotations

import threading
import time

from geode.protocol.turns import TerminationReason as R
from geode.testing.function_model import FunctionModel
from tests.loop.conftest import Rig


def test_cancel_aborts_a_model_request_that_has_not_answered(rig: Rig) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(_req):  # type: ignore[no-untyped-def]
        entered.set()
        release.wait(30)  # a provider stuck before its first byte
        return "too late"

    cancel = threading.Event()
    threading.Thread(target=lambda: entered.wait(10) and cancel.set(), daemon=True).start()
    t0 = time.monotonic()
    r = rig.loop(FunctionModel(slow)).run_turn("s", "t", "go", cancel=cancel)
    took = time.monotonic() - t0
    release.set()
    assert r.termination_reason == R.USER_CANCELLED and took < 3, (r, took)
    assert "model call" in (r.error or "")
    assert "text_delta" not in rig.sink.kinds()
