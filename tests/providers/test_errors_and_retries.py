"""Each error class through the real SDKs: the retry count the server saw, the terminal kind, server hints."""

from __future__ import annotations

import pytest

from geode.providers.types import ProviderError, ProviderErrorKind
from geode.testing.scenario import Scenario, ScriptedError, ScriptedReply
from tests.providers.conftest import WIRES, build, request

K = ProviderErrorKind
pytestmark = pytest.mark.parametrize("wire", WIRES)


def err(status: int, message: str = "scripted", **kw: object) -> ScriptedReply:
    return ScriptedReply(error=ScriptedError(status=status, message=message, **kw))  # type: ignore[arg-type]


RETRYABLE = [
    pytest.param(err(429, "slow down"), K.RATE_LIMIT, id="rate_limit"),
    pytest.param(err(529, "overloaded", type="overloaded_error"), K.OVERLOADED, id="overloaded"),
    pytest.param(err(500, "boom"), K.OVERLOADED, id="server_500"),
    pytest.param(err(503, "unavailable"), K.OVERLOADED, id="server_503"),
    pytest.param(ScriptedReply(drop_connection=True), K.CONNECTION, id="connection"),
]

TERMINAL = [
    pytest.param(err(401, "invalid x-api-key"), K.AUTH, id="auth"),
    pytest.param(err(403, "forbidden"), K.AUTH, id="permission"),
    pytest.param(err(400, "messages: field required"), K.BAD_REQUEST, id="bad_request"),
    pytest.param(
        err(400, "prompt is too long: 250000 tokens > 200000 maximum"), K.CONTEXT_OVERFLOW, id="context"
    ),
    pytest.param(err(400, "too long", code="context_length_exceeded"), K.CONTEXT_OVERFLOW, id="context_code"),
    pytest.param(err(402, "Your credit balance is too low"), K.BILLING, id="billing_402"),
    pytest.param(
        err(429, "You exceeded your current quota", code="insufficient_quota"), K.BILLING, id="quota"
    ),
]


@pytest.mark.parametrize(("reply", "kind"), RETRYABLE)
def test_retryable_errors_use_three_attempts(wire, server, fake_time, events, reply, kind):
    server.set_scenario(Scenario(replies=(reply,), repeat_last=True))
    with pytest.raises(ProviderError) as info:
        build(wire, server, fake_time, events).complete(request(wire))
    assert info.value.kind is kind
    assert info.value.attempts == 3
    assert info.value.hint
    assert len(server.requests) == 3
    assert len(fake_time.slept) == 2
    assert fake_time.slept[0] <= 2.0 and fake_time.slept[1] <= 4.0  # full jitter under base·2^(n-1)
    assert [e.type for e in events] == ["retry", "retry", "gave_up"]


@pytest.mark.parametrize(("reply", "kind"), TERMINAL)
def test_terminal_errors_are_not_retried(wire, server, fake_time, reply, kind):
    if reply.error.code and wire == "anthropic-messages":
        pytest.skip("Anthropic error bodies carry no OpenAI error code")
    server.set_scenario(Scenario(replies=(reply,), repeat_last=True))
    with pytest.raises(ProviderError) as info:
        build(wire, server, fake_time).complete(request(wire))
    assert info.value.kind is kind
    assert not info.value.retryable
    assert info.value.hint
    assert len(server.requests) == 1
    assert fake_time.slept == []


def test_timeout_is_retried(wire, server, fake_time):
    server.set_scenario(Scenario(replies=(ScriptedReply(text="late", delay_s=2.0),), repeat_last=True))
    with pytest.raises(ProviderError) as info:
        build(wire, server, fake_time, timeout_s=0.2).complete(request(wire))
    assert info.value.kind is K.TIMEOUT
    assert len(server.requests) == 3


def test_recovers_after_two_failures(wire, server, fake_time):
    server.set_scenario(Scenario.of(err(529, "overloaded"), err(429, "slow"), "finally"))
    resp = build(wire, server, fake_time).complete(request(wire))
    assert resp.text == "finally"
    assert resp.attempts == 3
    assert len(server.requests) == 3


def test_retry_after_is_honoured(wire, server, fake_time):
    server.set_scenario(Scenario.of(err(429, "slow", headers={"retry-after": "7"}), "ok"))
    resp = build(wire, server, fake_time).complete(request(wire))
    assert resp.text == "ok"
    assert fake_time.slept == [7.0]  # max(jitter <= 2 s, Retry-After 7 s)


def test_retry_after_ms_is_honoured(wire, server, fake_time):
    server.set_scenario(Scenario.of(err(503, "busy", headers={"retry-after-ms": "4500"}), "ok"))
    build(wire, server, fake_time).complete(request(wire))
    assert fake_time.slept == [4.5]


def test_retry_after_over_60_s_stops(wire, server, fake_time):
    server.set_scenario(Scenario.of(err(429, "slow", headers={"retry-after": "120"}), "never"))
    with pytest.raises(ProviderError) as info:
        build(wire, server, fake_time).complete(request(wire))
    assert info.value.kind is K.RATE_LIMIT
    assert len(server.requests) == 1
    assert fake_time.slept == []
    assert "120" in info.value.hint


def test_x_should_retry_false_stops(wire, server, fake_time):
    server.set_scenario(Scenario.of(err(529, "overloaded", headers={"x-should-retry": "false"}), "never"))
    with pytest.raises(ProviderError) as info:
        build(wire, server, fake_time).complete(request(wire))
    assert info.value.kind is K.OVERLOADED
    assert not info.value.retryable
    assert len(server.requests) == 1


def test_stream_error_before_output_is_retried(wire, server, fake_time):
    broken = ScriptedReply(
        chunks=(), stream_error_after_chunks=ScriptedError(type="overloaded_error", message="Overloaded")
    )
    server.set_scenario(Scenario.of(broken, "recovered"))
    resp = build(wire, server, fake_time).complete(request(wire))
    assert resp.text == "recovered"
    assert len(server.requests) == 2


def test_stream_error_after_output_is_terminal(wire, server, fake_time):
    broken = ScriptedReply(
        text="partial ",
        stream_error_after_chunks=ScriptedError(type="overloaded_error", message="Overloaded"),
    )
    server.set_scenario(Scenario.of(broken, "never"))
    deltas: list[str] = []
    with pytest.raises(ProviderError) as info:
        build(wire, server, fake_time).complete(request(wire), deltas.append)
    assert info.value.kind is K.STREAM_INTERRUPTED
    assert deltas == ["partial "]
    assert len(server.requests) == 1


def test_sdk_retries_are_off(wire, server, fake_time):
    server.set_scenario(Scenario.of(err(500, "x"), "ok"))
    build(wire, server, fake_time).complete(request(wire))
    assert [r.headers.get("x-stainless-retry-count") for r in server.requests] == ["0", "0"]


def test_per_call_on_event_receives_retries(wire, server, fake_time, events):
    server.set_scenario(Scenario.of(err(503, "busy"), "ok"))
    turn_events: list = []
    build(wire, server, fake_time, events).complete(request(wire), on_event=turn_events.append)
    assert [e.type for e in turn_events] == [e.type for e in events] == ["retry"]
    assert turn_events[0].reason == "overloaded" and turn_events[0].attempt == 1


class Cancelled(Exception):
    pass


def test_on_delta_exception_propagates_unchanged(wire, server, fake_time):
    server.set_scenario(Scenario(replies=(ScriptedReply(text="one two three"),), repeat_last=True))

    def on_delta(text: str) -> None:
        raise Cancelled(text)

    with pytest.raises(Cancelled):
        build(wire, server, fake_time).complete(request(wire), on_delta)
    assert len(server.requests) == 1


def test_errors_leaving_the_provider_are_final(wire, server, fake_time):
    server.set_scenario(Scenario(replies=(err(429, "slow"),), repeat_last=True))
    with pytest.raises(ProviderError) as info:
        build(wire, server, fake_time).complete(request(wire))
    assert info.value.kind is K.RATE_LIMIT and info.value.attempts == 3
    assert info.value.retryable is False  # the loop must not add a second retry layer
