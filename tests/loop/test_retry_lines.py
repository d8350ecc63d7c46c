"""Retries reach the CLI as one ready line, ``retrying in 1.2 s (connection error, attempt 1/3)``, from both
the provider's own retrier and the loop's bounded retry; the CLI prints that line, never a raw dict."""

from __future__ import annotations

import io
import re
import threading

from actors.cli.render import Renderer
from geode.loop import ListSink, LoopSettings
from geode.loop.events import EventStream, bind_current, relay_provider_event, unbind_current
from geode.protocol.turns import TerminationReason as R
from geode.providers.events import ProviderEvent
from geode.providers.types import ProviderError, ProviderErrorKind
from tests.loop.conftest import Rig

LINE = re.compile(r"^retrying in \d+\.\d s \([a-z ]+ error, attempt \d+/\d+\)$")


def _render(events: list[dict]) -> str:
    out = io.StringIO()
    r = Renderer(out)
    for ev in events:
        r(ev)
    return out.getvalue()


def test_provider_retries_carry_a_ready_line_and_the_cli_prints_it() -> None:
    sink = ListSink()
    token = bind_current(EventStream(sink, "s", "t"), threading.Event())
    try:
        relay_provider_event(
            ProviderEvent(
                type="retry",
                provider="anthropic",
                model="m",
                attempt=1,
                max_attempts=3,
                reason="connection",
                delay_s=1.234,
            )
        )
    finally:
        unbind_current(token)
    retry = next(e for e in sink.events if e.kind == "llm_retry")
    assert retry.data["message"] == "retrying in 1.2 s (connection error, attempt 1/3)"
    shown = _render([e.model_dump(mode="json") for e in sink.events])
    assert shown == "· retrying in 1.2 s (connection error, attempt 1/3)\n"


def test_loop_retries_carry_a_ready_line(rig: Rig) -> None:
    err = ProviderError(ProviderErrorKind.RATE_LIMIT, "slow down", retry_after_s=0.01)
    r = rig.loop(rig.script(err, "after retry"), settings=LoopSettings(model="m")).run_turn("s", "t", "go")
    assert r.termination_reason == R.NATURAL
    retries = [e for e in rig.sink.events if e.kind == "llm_retry"]
    assert retries and LINE.match(retries[0].data["message"]), retries[0].data
    assert "rate limit error, attempt 1/" in retries[0].data["message"]
