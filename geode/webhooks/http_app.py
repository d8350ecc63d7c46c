"""The webhooks child's aiohttp application: ``POST <route path>`` takes a delivery, ``GET
/status/<turn_id>?token=<hex>`` shows its turn.

A delivery passes, in this order: unknown path 404 → method 405 → rate limit 429 (``Retry-After``) → body
over the route's max 413 (``Content-Length`` first, then a stream-limited read: an oversized body is never
held) → authentication 401 → JSON 400 → missing delivery header 400 → the intake recorded in the store (a
worker thread: the port is blocking): queue full, store error or no worker free → 503 with ``Retry-After``
and nothing recorded → 202 ``{"turn_id", "status_url"}`` (new) or 200 ``{"turn_id", "status_url",
"status"}`` (a delivery already recorded: nothing started). A Slack route answers Slack's signed
``url_verification`` with its challenge and records nothing. Each refusal is one log line (route, client,
status, reason), never the body, a header's value or a secret, never a traceback."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from aiohttp import web

from geode import faults
from geode.protocol.errors import GeodeError
from geode.redaction import redact_text
from geode.webhooks import counters as why
from geode.webhooks.auth import verify
from geode.webhooks.counters import Counters
from geode.webhooks.ids import body_key, check_status_token, status_token
from geode.webhooks.ports import IntakePort, status_word
from geode.webhooks.ratelimit import RateLimiter
from geode.webhooks.settings import AUTH_HEADERS, STATUS_PREFIX

if TYPE_CHECKING:
    from geode.records.intake_models import RecordResult
    from geode.webhooks.settings import RouteSpec

log = logging.getLogger(__name__)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
RETRY_BUSY_S = 5  # Retry-After of a 503 (store unavailable, no worker free)
RETRY_FULL_S = 30  # Retry-After of a 503 for a full queue (turns take a while to end)
DELIVERY_ID = re.compile(r"[\x21-\x7e]{1,256}")  # printable ASCII, no space: it names the intake
INTAKE: web.AppKey[Intake] = web.AppKey("webhooks_intake")


def status_url(key: bytes, turn_id: str) -> str:
    """The status url of a turn, relative to the listener: ``/status/<turn_id>?token=<hex>``."""
    return f"{STATUS_PREFIX}{turn_id}?token={status_token(key, turn_id)}"


def networks(items: Iterable[str | Network]) -> tuple[Network, ...]:
    """``trusted_proxies`` (IPs or CIDRs) as networks; a bare IP is a /32 (/128)."""
    return tuple(
        i if not isinstance(i, str) else ipaddress.ip_network(i.strip(), strict=False) for i in items
    )


def client_address(peer: str, forwarded_for: str | None, trusted: tuple[Network, ...]) -> str:
    """The client a request counts for (rate limits, logs, the intake's ``client``): the peer, unless the
    peer is a trusted proxy and sent ``X-Forwarded-For``; then the right-most address of that header which
    is not itself a trusted proxy (a client can prepend anything; only what our proxies appended counts)."""
    if not trusted or not forwarded_for or not _trusted(peer, trusted):
        return peer
    client = peer
    for hop in reversed(forwarded_for.split(",")):
        try:
            addr = ipaddress.ip_address(hop.strip())
        except ValueError:
            return client  # garbage where an address should be: the last hop we could vouch for
        client = str(addr)
        if not any(addr in net for net in trusted):
            return client
    return client


def _trusted(peer: str, trusted: tuple[Network, ...]) -> bool:
    try:
        addr = ipaddress.ip_address(peer)
    except ValueError:
        return False
    return any(addr in net for net in trusted)


def _reply(status: int, error: str, retry_after: int | None = None) -> web.Response:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return web.json_response({"error": error}, status=status, headers=headers)


class Intake:
    """The app's state and handlers (one per application; the child may :meth:`reconfigure` it)."""

    def __init__(
        self,
        routes: Iterable[RouteSpec],
        port: IntakePort,
        *,
        secrets: Callable[[str], list[bytes]],
        trusted_proxies: Iterable[str | Network],
        key: bytes,
        clock: Callable[[], float],
        monotonic: Callable[[], float],
        counters: Counters,
        workers: int,
        backlog: int,
        max_clients: int,
    ) -> None:
        self.port, self.secrets, self.key, self.clock = port, secrets, key, clock
        self.counters = counters
        self.limiter = RateLimiter(clock=monotonic, max_clients=max_clients)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="webhooks-intake")
        self.max_pending, self.pending = workers + backlog, 0
        self.routes: dict[str, RouteSpec] = {}
        self.trusted: tuple[Network, ...] = ()
        self.reconfigure(routes, trusted_proxies)

    def reconfigure(
        self, routes: Iterable[RouteSpec], trusted_proxies: Iterable[str | Network] | None = None
    ) -> None:
        """Serve ``routes`` from now on (a reload); a route whose limits changed starts with fresh buckets."""
        new = {r.path: r for r in routes}
        for old in self.routes.values():
            now = new.get(old.path)
            if now is None or (now.rate_per_minute, now.rate_burst) != (old.rate_per_minute, old.rate_burst):
                self.limiter.forget_route(old.name)
        self.routes = new
        if trusted_proxies is not None:
            self.trusted = networks(trusted_proxies)

    def client(self, request: web.Request) -> str:
        return client_address(request.remote or "", request.headers.get("X-Forwarded-For"), self.trusted)

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path.startswith(STATUS_PREFIX):
            return await self.status(request, path[len(STATUS_PREFIX) :])
        route = self.routes.get(path)
        if route is None:
            self.counters.unrouted()
            log.debug("webhooks: 404 %s from %s: no route", request.method, self.client(request))
            return _reply(404, "no such route")
        return await self.deliver(request, route)

    async def deliver(self, request: web.Request, route: RouteSpec) -> web.StreamResponse:
        client = self.client(request)
        if request.method != "POST":
            return self._refuse(route, client, 405, why.NOT_ALLOWED, "only POST", level=logging.DEBUG)
        wait = self.limiter.take(
            route.name, client, rate_per_minute=route.rate_per_minute, burst=route.rate_burst
        )
        if wait:
            self.counters.rate_limited(route.name)
            log.debug("webhooks: 429 %s from %s: rate limited (retry after %ds)", route.name, client, wait)
            return _reply(429, "rate limited", wait)
        body = await self._read(request, route.max_body_bytes)
        if body is None:
            response = self._refuse(
                route, client, 413, why.TOO_LARGE, f"body over {route.max_body_bytes} bytes"
            )
            response.force_close()  # the rest of the body is never read
            return response
        try:
            secrets = self.secrets(route.name)
        except GeodeError as exc:
            return self._refuse(route, client, 503, why.NO_SECRET, "route not ready", RETRY_FULL_S, str(exc))
        auth = verify(route, secrets, request.headers, body, self.clock())
        if not auth.ok:
            return self._refuse(route, client, 401, auth.reason, f"authentication failed: {auth.reason}")
        if route.json_body and not _json_object(body):
            return self._refuse(route, client, 400, why.INVALID_JSON, "the body must be a JSON object")
        if route.auth == "slack" and (challenge := _slack_challenge(body)) is not None:
            log.info("webhooks: %s answered Slack's url_verification (nothing recorded)", route.name)
            return web.json_response({"challenge": challenge})
        if route.delivery_header:
            delivery = request.headers.get(route.delivery_header, "").strip()
            if not delivery:
                msg = f"missing delivery header {route.delivery_header}"
                return self._refuse(route, client, 400, why.NO_DELIVERY_ID, msg)
            if not DELIVERY_ID.fullmatch(delivery):
                msg = f"{route.delivery_header} must be 1-256 printable characters"
                return self._refuse(route, client, 400, why.BAD_DELIVERY_ID, msg)
        else:
            delivery = body_key(body)
        kept = {
            h: request.headers[h]
            for h in route.keep_headers
            if h in request.headers and h.lower() not in AUTH_HEADERS
        }
        return await self._record(route, client, delivery, kept, body)

    async def _read(self, request: web.Request, limit: int) -> bytes | None:
        """The body, or None once it is over ``limit`` bytes (never reading more than ``limit + 64 KiB``)."""
        if request.content_length is not None and request.content_length > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.content.iter_any():
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    async def _record(
        self, route: RouteSpec, client: str, delivery: str, headers: dict[str, str], body: bytes
    ) -> web.StreamResponse:
        if self.pending >= self.max_pending:
            return self._refuse(route, client, 503, why.BUSY, "busy, retry later", RETRY_BUSY_S)
        self.pending += 1
        try:
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(
                self.pool, self._record_blocking, route, delivery, headers, body, client
            )
        except GeodeError as exc:  # the store's words may quote what it refused: redacted, short
            msg = "the intake could not be recorded, retry later"
            return self._refuse(
                route, client, 503, why.STORE_ERROR, msg, RETRY_BUSY_S, redact_text(str(exc), 200)
            )
        except Exception as exc:  # a bug in the port: still never a 2xx, and the child serves on
            log.exception("webhooks: recording a delivery of %s failed", route.name)
            msg = "the intake could not be recorded, retry later"
            return self._refuse(route, client, 503, why.STORE_ERROR, msg, RETRY_BUSY_S, type(exc).__name__)
        finally:
            self.pending -= 1
        row = result.row
        if result.full or row is None:
            msg = f"the route's queue is full ({result.open} open), retry later"
            return self._refuse(route, client, 503, why.QUEUE_FULL, msg, RETRY_FULL_S)
        url = status_url(self.key, row.turn_id)
        if result.replayed:
            self.counters.replayed(route.name)
            status = status_word(row.state)
            return web.json_response(
                {"turn_id": row.turn_id, "status_url": url, "status": status}, status=200
            )
        self.counters.accepted(route.name)
        return web.json_response({"turn_id": row.turn_id, "status_url": url}, status=202)

    def _record_blocking(
        self, route: RouteSpec, delivery: str, headers: dict[str, str], body: bytes, client: str
    ) -> RecordResult:
        result = self.port.record(route, delivery, headers, body, client)
        if result.row is not None and not result.replayed and not result.full:
            faults.fault("webhooks.after_intake")
            try:
                self.port.recorded(result.row)
            except (
                Exception
            ) as exc:  # recorded durably all the same: the runner finds it open at its next start
                log.warning("webhooks: intake %s recorded, the runner not told: %s", result.row.turn_id, exc)
        return result

    async def status(self, request: web.Request, turn_id: str) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            return _reply(405, "only GET")
        token = request.query.get("token", "")
        if not turn_id or not token or not check_status_token(self.key, turn_id, token):
            log.debug("webhooks: 404 status from %s: unknown turn or wrong token", self.client(request))
            return _reply(404, "no such turn")
        try:
            view = await asyncio.get_running_loop().run_in_executor(self.pool, self.port.status, turn_id)
        except Exception as exc:  # the store unavailable (or a bug in the port): the child serves on
            log.info(
                "webhooks: 503 status of %s: %s", turn_id, redact_text(str(exc) or type(exc).__name__, 200)
            )
            return _reply(503, "status unavailable, retry later", RETRY_BUSY_S)
        if view is None:
            return _reply(404, "no such turn")
        return web.Response(text=view.model_dump_json(), content_type="application/json")

    def _refuse(
        self,
        route: RouteSpec,
        client: str,
        status: int,
        reason: str,
        message: str,
        retry_after: int | None = None,
        detail: str = "",
        *,
        level: int = logging.INFO,
    ) -> web.Response:
        self.counters.rejected(route.name, reason)
        log.log(
            level,
            "webhooks: %d %s from %s: %s%s",
            status,
            route.name,
            client,
            reason,
            f" ({detail})" if detail else "",
        )
        return _reply(status, message, retry_after)


def _json_object(body: bytes) -> bool:
    try:
        return isinstance(json.loads(body), dict)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return False


def _slack_challenge(body: bytes) -> str | None:
    """The ``challenge`` of Slack's signed ``url_verification`` request (sent once when an Events API url
    is set up: echoed, nothing recorded), None for any other body."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("type") != "url_verification":
        return None
    challenge = data.get("challenge")
    return challenge if isinstance(challenge, str) and 0 < len(challenge) <= 512 else None


def make_app(
    routes: Iterable[RouteSpec],
    port: IntakePort,
    *,
    secrets: Callable[[str], list[bytes]],
    trusted_proxies: Iterable[str | Network] = (),
    key: bytes,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
    counters: Counters | None = None,
    workers: int = 8,
    backlog: int = 64,
    max_clients: int = 10_000,
) -> web.Application:
    """The webhooks application. ``secrets(route name)`` → the route's 1-2 secrets (read at each delivery,
    so a reload of ``.env`` applies); ``key``: the status tokens' key; ``clock``: wall seconds (signed
    timestamps); ``monotonic``: the rate limiter's clock; ``workers`` threads run the port, ``backlog`` more
    deliveries may wait for one (beyond: 503). ``app[INTAKE]`` is the state (counters, ``reconfigure``)."""
    intake = Intake(
        routes,
        port,
        secrets=secrets,
        trusted_proxies=trusted_proxies,
        key=key,
        clock=clock,
        monotonic=monotonic,
        counters=counters if counters is not None else Counters(),
        workers=workers,
        backlog=backlog,
        max_clients=max_clients,
    )
    app = web.Application(client_max_size=1024)  # handlers read the body themselves, bounded per route
    app[INTAKE] = intake
    app.router.add_route("*", "/{tail:.*}", intake.dispatch)

    async def _stop_pool(_: web.Application) -> None:
        intake.pool.shutdown(wait=False, cancel_futures=True)

    app.on_cleanup.append(_stop_pool)
    return app
