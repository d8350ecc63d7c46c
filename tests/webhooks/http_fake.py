"""What the webhooks HTTP app tests share: the intake table in memory (the store's record rule: replayed /
full / new), routes, GitHub and Stripe signatures computed with ``hmac`` here (never the project's code), and
the app served on 127.0.0.1:0 with an aiohttp.ClientSession pointed at it."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import aiohttp
from aiohttp import web

from geode.records.intake_models import IntakeRow, RecordResult
from geode.webhooks.http_app import make_app
from geode.webhooks.ids import delivery_turn_id
from geode.webhooks.ports import StatusView, status_word
from geode.webhooks.settings import RouteSpec

SECRET = b"It's a Secret to Everybody"
KEY = b"k" * 32
NOW = 1_760_000_000.0
BODY = json.dumps({"action": "opened", "repository": {"full_name": "octo/repo"}}).encode()


def gh_route(**kw: Any) -> RouteSpec:
    spec: dict[str, Any] = {
        "name": "gh",
        "path": "/hooks/gh",
        "auth": "github",
        "secrets": ["GH_SECRET"],
        "prompt": "A GitHub event arrived.",
        "keep_headers": ["X-GitHub-Event"],
        "max_body_bytes": 1000,
        "rate_burst": 1000,
        **kw,
    }
    return RouteSpec.model_validate(spec)


STRIPE = RouteSpec.model_validate(
    {
        "name": "pay",
        "path": "/hooks/pay",
        "auth": "stripe",
        "secrets": ["PAY_SECRET"],
        "prompt": "A payment event.",
        "delivery_header": "",
        "dedupe_window": "24h",
        "rate_burst": 1000,
    }
)


def signed(body: bytes = BODY, delivery: str = "d-1", **extra: str) -> dict[str, str]:
    sig = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    headers = {
        "X-Hub-Signature-256": sig,
        "X-GitHub-Event": "pull_request",
        "Content-Type": "application/json",
    }
    if delivery:
        headers["X-GitHub-Delivery"] = delivery
    return {**headers, **extra}


def stripe_signed(body: bytes, t: int) -> dict[str, str]:
    mac = hmac.new(SECRET, str(t).encode() + b"." + body, hashlib.sha256).hexdigest()
    return {"Stripe-Signature": f"t={t},v1={mac}"}


class FakePort:
    """The intake table in memory, with the store's record rule (replayed / full / new)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], IntakeRow] = {}
        self.told: list[IntakeRow] = []
        self.calls = 0
        self.fail: Exception | None = None
        self.lock = threading.Lock()

    def record(
        self, route: RouteSpec, dedupe_key: str, headers: dict[str, str], body: bytes, client: str
    ) -> RecordResult:
        with self.lock:
            self.calls += 1
            if self.fail is not None:
                raise self.fail
            opened = sum(1 for r in self.rows.values() if r.route == route.name and r.open)
            old = self.rows.get((route.name, dedupe_key))
            if old is not None:
                return RecordResult(row=old, replayed=True, open=opened)
            if opened >= route.queue_max:
                return RecordResult(full=True, open=opened)
            row = IntakeRow(
                route=route.name,
                delivery_id=dedupe_key,
                dedupe_key=dedupe_key,
                turn_id=delivery_turn_id(route.name, dedupe_key),
                received_at=datetime.now(UTC),
                client=client,
                headers=headers,
                body=body,
                body_sha256=hashlib.sha256(body).hexdigest(),
            )
            self.rows[(route.name, dedupe_key)] = row
            return RecordResult(row=row, open=opened + 1)

    def recorded(self, row: IntakeRow) -> None:
        self.told.append(row)

    def status(self, turn_id: str) -> StatusView | None:
        for r in self.rows.values():
            if r.turn_id == turn_id:
                return StatusView(
                    turn_id=turn_id, route=r.route, delivery_id=r.delivery_id, status=status_word(r.state)
                )
        return None


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@asynccontextmanager
async def serve(
    routes: list[RouteSpec], port: FakePort, **kw: Any
) -> AsyncIterator[tuple[aiohttp.ClientSession, web.Application]]:
    kw.setdefault("secrets", lambda name: [SECRET])
    app = make_app(routes, port, key=KEY, clock=Clock(NOW), **kw)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    where = f"http://127.0.0.1:{runner.addresses[0][1]}"
    timeout = aiohttp.ClientTimeout(total=10)
    try:
        async with aiohttp.ClientSession(where, timeout=timeout) as session:
            yield session, app
    finally:
        await runner.cleanup()


async def post(
    session: aiohttp.ClientSession, path: str, body: Any, headers: dict[str, str]
) -> tuple[int, Any, Any]:
    async with session.post(path, data=body, headers=headers) as resp:
        text = await resp.text()
        return resp.status, resp.headers, json.loads(text) if text else None
