"""The webhooks HTTP app over real HTTP (an aiohttp server on 127.0.0.1:0, an aiohttp.ClientSession) with an
in-memory intake port: every bad input gets its status and records nothing; a delivery is 202 once, 200 with
the same turn id after; 429/503 carry Retry-After; X-Forwarded-For counts only from a trusted proxy; a status
url answers only with its token. The fake port and the signing are in tests/webhooks/http_fake.py."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from geode import faults
from geode.protocol.errors import ConfigError, Unavailable
from geode.records.intake_models import IntakeRow, RecordResult
from geode.webhooks.http_app import INTAKE, client_address, networks
from geode.webhooks.ids import delivery_turn_id
from geode.webhooks.settings import RouteSpec
from tests.webhooks.http_fake import (
    BODY,
    NOW,
    SECRET,
    STRIPE,
    Clock,
    FakePort,
    gh_route,
    post,
    serve,
    signed,
    stripe_signed,
)


async def test_a_delivery_is_202_once_then_200_with_the_same_turn_and_starts_one_turn() -> None:
    port = FakePort()
    async with serve([gh_route()], port) as (session, app):
        status, _, first = await post(session, "/hooks/gh", BODY, signed())
        assert status == 202 and set(first) == {"turn_id", "status_url"}
        assert first["turn_id"] == delivery_turn_id("gh", "d-1")
        for _ in range(2):
            status, _, again = await post(session, "/hooks/gh", BODY, signed())
            assert status == 200 and again["turn_id"] == first["turn_id"] and again["status"] == "queued"
        assert len(port.told) == 1  # one turn started, the replays started nothing
        row = port.told[0]
        assert row.body == BODY and row.client == "127.0.0.1"
        assert row.headers == {"X-GitHub-Event": "pull_request"}  # kept ones only, never the signature
        async with session.get(first["status_url"]) as resp:
            assert resp.status == 200
            view = await resp.json()
        assert (
            view["turn_id"] == first["turn_id"]
            and view["status"] == "queued"
            and view["delivery_id"] == "d-1"
        )
        counts = app[INTAKE].counters.route("gh")
        assert (counts.accepted, counts.replayed, counts.rejected) == (1, 2, {})


def _cases() -> list[Any]:
    big = b"{" + b" " * 1200 + b"}"
    arr = b"[1, 2]"
    return [
        pytest.param(
            "/hooks/gh",
            BODY,
            signed(**{"X-Hub-Signature-256": "sha256=" + "0" * 64}),
            401,
            "bad_signature",
            id="wrong-signature",
        ),
        pytest.param("/hooks/gh", BODY, {"X-GitHub-Delivery": "d-1"}, 401, "missing", id="missing-auth"),
        pytest.param(
            "/hooks/pay", BODY, stripe_signed(BODY, int(NOW) - 1000), 401, "stale", id="stale-timestamp"
        ),
        pytest.param("/hooks/nope", BODY, signed(), 404, None, id="unknown-route"),
        pytest.param("/hooks/gh", big, signed(big), 413, "body_too_large", id="over-limit-content-length"),
        pytest.param("/hooks/gh", b"{not json", signed(b"{not json"), 400, "invalid_json", id="invalid-json"),
        pytest.param("/hooks/gh", arr, signed(arr), 400, "invalid_json", id="json-not-an-object"),
        pytest.param(
            "/hooks/gh", BODY, signed(delivery=""), 400, "missing_delivery_id", id="no-delivery-header"
        ),
        pytest.param(
            "/hooks/gh", BODY, signed(delivery="x" * 257), 400, "bad_delivery_id", id="delivery-id-too-long"
        ),
    ]


@pytest.mark.parametrize(("path", "body", "headers", "want", "reason"), _cases())
async def test_bad_input_gets_its_status_and_records_nothing(
    path: str,
    body: bytes,
    headers: dict[str, str],
    want: int,
    reason: str | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = FakePort()
    caplog.set_level(logging.DEBUG, logger="geode.webhooks")
    async with serve([gh_route(), STRIPE], port) as (session, app):
        status, _, reply = await post(session, path, body, headers)
        assert status == want and isinstance(reply["error"], str)
        assert port.calls == 0 and port.rows == {} and port.told == []
        if reason is not None:
            route = "pay" if path == "/hooks/pay" else "gh"
            assert app[INTAKE].counters.route(route).rejected == {reason: 1}
        # the server still serves: a good delivery afterwards is accepted
        status, _, _ = await post(session, "/hooks/gh", BODY, signed(delivery="after"))
        assert status == 202 and len(port.told) == 1
    lines = [r for r in caplog.records if r.name.startswith("geode.webhooks") and f"{want}" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None  # one line, never a traceback
    text = lines[0].getMessage()
    assert "repository" not in text and "octo/repo" not in text and "sha256=" not in text and "t=" not in text


async def test_a_get_on_a_route_is_405() -> None:
    port = FakePort()
    async with serve([gh_route()], port) as (session, app):
        async with session.get("/hooks/gh") as resp:
            assert resp.status == 405
        assert port.calls == 0 and app[INTAKE].counters.route("gh").rejected == {"method_not_allowed": 1}


async def test_a_chunked_body_over_the_limit_is_413_before_its_end() -> None:
    """The body streams with no Content-Length and never ends: the app answers once it is over the limit
    (reading the whole body first would wait forever)."""
    port = FakePort()
    never = asyncio.Event()

    async def chunks() -> AsyncIterator[bytes]:
        yield b"{" + b" " * 599
        yield b" " * 600
        await never.wait()
        yield b"}"

    async with serve([gh_route()], port) as (session, app):
        status, _, _ = await asyncio.wait_for(post(session, "/hooks/gh", chunks(), signed()), 5)
        assert status == 413 and port.calls == 0
        assert app[INTAKE].counters.route("gh").rejected == {"body_too_large": 1}
        status, _, _ = await post(session, "/hooks/gh", BODY, signed(delivery="after"))
        assert status == 202
    never.set()


async def test_a_flood_is_429_with_retry_after_and_the_bucket_refills() -> None:
    port, mono = FakePort(), Clock(100.0)
    async with serve([gh_route(rate_per_minute=60, rate_burst=2)], port, monotonic=mono) as (session, app):
        for i in range(2):
            assert (await post(session, "/hooks/gh", BODY, signed(delivery=f"d-{i}")))[0] == 202
        status, headers, _ = await post(session, "/hooks/gh", BODY, signed(delivery="d-2"))
        assert status == 429 and headers["Retry-After"] == "1"
        assert len(port.rows) == 2 and port.calls == 2
        mono.t += 1.0
        assert (await post(session, "/hooks/gh", BODY, signed(delivery="d-2")))[0] == 202
        assert app[INTAKE].counters.route("gh").rate_limited == 1


async def test_a_full_queue_is_503_with_retry_after_and_records_nothing() -> None:
    port = FakePort()
    async with serve([gh_route(queue_max=1)], port) as (session, app):
        assert (await post(session, "/hooks/gh", BODY, signed(delivery="d-1")))[0] == 202
        status, headers, _ = await post(session, "/hooks/gh", BODY, signed(delivery="d-2"))
        assert status == 503 and int(headers["Retry-After"]) > 0
        assert list(port.rows) == [("gh", "d-1")] and len(port.told) == 1
        assert app[INTAKE].counters.route("gh").rejected == {"queue_full": 1}


async def test_a_store_error_is_503_with_retry_after_and_the_retry_is_accepted() -> None:
    port = FakePort()
    port.fail = Unavailable("store: no reply")
    async with serve([gh_route()], port) as (session, app):
        status, headers, _ = await post(session, "/hooks/gh", BODY, signed())
        assert status == 503 and int(headers["Retry-After"]) > 0
        assert port.rows == {} and port.told == []
        port.fail = None
        status, _, reply = await post(session, "/hooks/gh", BODY, signed())
        assert status == 202 and reply["turn_id"] == delivery_turn_id("gh", "d-1")
        assert app[INTAKE].counters.route("gh").rejected == {"store_error": 1}


async def test_x_forwarded_for_counts_only_from_a_trusted_proxy() -> None:
    route = gh_route(rate_per_minute=60, rate_burst=1)
    fwd = [{"X-Forwarded-For": "10.9.9.9, 203.0.113.7"}, {"X-Forwarded-For": "10.9.9.9, 198.51.100.4"}]
    port = FakePort()
    async with serve([route], port, trusted_proxies=["127.0.0.0/8"]) as (session, _):
        for i, xff in enumerate(fwd):  # two clients behind our proxy: a bucket each
            assert (await post(session, "/hooks/gh", BODY, signed(delivery=f"d-{i}", **xff)))[0] == 202
    assert [r.client for r in port.told] == ["203.0.113.7", "198.51.100.4"]
    port = FakePort()
    async with serve([route], port, trusted_proxies=["192.0.2.0/24"]) as (session, _):
        assert (await post(session, "/hooks/gh", BODY, signed(delivery="d-0", **fwd[0])))[0] == 202
        assert (await post(session, "/hooks/gh", BODY, signed(delivery="d-1", **fwd[1])))[0] == 429
    assert [r.client for r in port.told] == ["127.0.0.1"]


def test_the_client_is_the_right_most_untrusted_hop() -> None:
    trusted = networks(["127.0.0.1", "10.0.0.0/8"])
    assert client_address("127.0.0.1", "6.6.6.6, 203.0.113.7, 10.1.1.1", trusted) == "203.0.113.7"
    assert client_address("127.0.0.1", "10.2.2.2, 10.1.1.1", trusted) == "10.2.2.2"
    assert client_address("127.0.0.1", "not-an-ip, 203.0.113.7", trusted) == "203.0.113.7"
    assert client_address("127.0.0.1", "garbage", trusted) == "127.0.0.1"
    assert client_address("192.0.2.1", "203.0.113.7", trusted) == "192.0.2.1"  # not from our proxy


async def test_a_status_url_answers_only_with_its_token() -> None:
    port = FakePort()
    async with serve([gh_route()], port) as (session, _):
        _, _, one = await post(session, "/hooks/gh", BODY, signed(delivery="d-1"))
        _, _, two = await post(session, "/hooks/gh", BODY, signed(delivery="d-2"))
        turn = one["turn_id"]
        other_token = two["status_url"].split("token=")[1]
        for url in (
            f"/status/{turn}?token={'0' * 32}",
            f"/status/{turn}?token={other_token}",
            f"/status/{turn}",
        ):
            async with session.get(url) as resp:
                assert resp.status == 404, url
                assert turn not in await resp.text()
        async with session.get(one["status_url"]) as resp:
            assert resp.status == 200 and (await resp.json())["turn_id"] == turn


async def test_a_reload_serves_the_new_routes() -> None:
    port = FakePort()
    async with serve([gh_route()], port) as (session, app):
        app[INTAKE].reconfigure([gh_route(name="gh2", path="/hooks/gh2")])
        assert (await post(session, "/hooks/gh", BODY, signed()))[0] == 404
        status, _, reply = await post(session, "/hooks/gh2", BODY, signed())
        assert status == 202 and reply["turn_id"] == delivery_turn_id("gh2", "d-1")


async def test_no_free_worker_is_503_with_retry_after_and_records_nothing() -> None:
    """The port runs in a bounded pool: with its one worker held and no backlog, a delivery is refused."""
    release, entered = threading.Event(), threading.Event()

    class HeldPort(FakePort):
        def record(self, *args: Any) -> RecordResult:
            entered.set()
            release.wait(10)
            return super().record(*args)

    port = HeldPort()
    async with serve([gh_route()], port, workers=1, backlog=0) as (session, app):
        first = asyncio.create_task(post(session, "/hooks/gh", BODY, signed(delivery="d-1")))
        assert await asyncio.to_thread(entered.wait, 10)
        status, headers, _ = await post(session, "/hooks/gh", BODY, signed(delivery="d-2"))
        assert status == 503 and int(headers["Retry-After"]) > 0
        release.set()
        assert (await first)[0] == 202
        assert list(port.rows) == [("gh", "d-1")]
        assert app[INTAKE].counters.route("gh").rejected == {"busy": 1}


async def test_a_route_whose_secret_is_missing_is_503_and_records_nothing() -> None:
    def no_secret(name: str) -> list[bytes]:
        raise ConfigError(f"route {name!r}: GH_SECRET is not in $GEODE_HOME/.env")

    port = FakePort()
    async with serve([gh_route()], port, secrets=no_secret) as (session, app):
        status, headers, _ = await post(session, "/hooks/gh", BODY, signed())
        assert status == 503 and int(headers["Retry-After"]) > 0 and port.calls == 0
        assert app[INTAKE].counters.route("gh").rejected == {"no_secret": 1}


async def test_the_after_intake_fault_point_is_between_the_record_and_the_reply(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``webhooks.after_intake`` is reached once per new intake, after it is recorded and before the runner
    is told (a kill there: recorded, no reply, no turn submitted), and never for a replay."""
    events: list[str] = []

    class Tracing(FakePort):
        def record(self, *args: Any) -> RecordResult:
            events.append("record")
            return super().record(*args)

        def recorded(self, row: IntakeRow) -> None:
            events.append("recorded")
            super().recorded(row)

    monkeypatch.setattr(faults, "fault", lambda point: events.append(point))
    async with serve([gh_route()], Tracing()) as (session, _):
        assert (await post(session, "/hooks/gh", BODY, signed()))[0] == 202
        assert (await post(session, "/hooks/gh", BODY, signed()))[0] == 200
    assert events == ["record", "webhooks.after_intake", "recorded", "record"]


async def test_a_status_read_the_store_cannot_answer_is_503_with_retry_after() -> None:
    class Down(FakePort):
        def status(self, turn_id: str) -> Any:
            raise Unavailable("store: no reply")

    async with serve([gh_route()], Down()) as (session, _):
        _, _, one = await post(session, "/hooks/gh", BODY, signed())
        async with session.get(one["status_url"]) as resp:
            assert resp.status == 503 and int(resp.headers["Retry-After"]) > 0


async def test_a_slack_route_answers_the_signed_url_verification_and_records_nothing() -> None:
    """Slack sends a signed ``url_verification`` once when the Events API url is set up: it gets its
    challenge back; unsigned it is a 401; an event afterwards is an intake as usual."""
    slack = RouteSpec.model_validate(
        {
            "name": "sl",
            "path": "/hooks/sl",
            "auth": "slack",
            "secrets": ["SL_SECRET"],
            "prompt": "A Slack event.",
            "delivery_header": "",
            "dedupe_window": "1h",
            "rate_burst": 1000,
        }
    )

    def slack_signed(body: bytes) -> dict[str, str]:
        ts = str(int(NOW))
        mac = hmac.new(SECRET, b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
        return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={mac}"}

    port = FakePort()
    hello = json.dumps({"token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV", "type": "url_verification"})
    async with serve([slack], port) as (session, _):
        status, _, got = await post(session, "/hooks/sl", hello.encode(), slack_signed(hello.encode()))
        assert status == 200 and got == {"challenge": "3eZbrw1aBm2rZgRNFdxV"}
        status, _, _ = await post(session, "/hooks/sl", hello.encode(), {})
        assert status == 401
        assert not port.told
        event = json.dumps({"type": "event_callback", "event_id": "Ev1"}).encode()
        status, _, got = await post(session, "/hooks/sl", event, slack_signed(event))
        assert status == 202 and len(port.told) == 1
