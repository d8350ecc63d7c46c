"""What the webhook tree tests (the acceptance tree, the kill cells) share: a sender that signs as GitHub and
Stripe do with ``hmac`` in the test itself (never the project's code), sends over real HTTP (one request, a
retried one until a 2xx, several at once over keep-alive connections), and reads what the tree recorded: the
intake table's rows and counts, the turn records, the webhooks child's counters and process."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import http.client
import json
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp

from actors.cli.child_view import ask_child
from actors.tree.client import client_bus
from geode.home import GeodeHome
from geode.protocol import webhooks as wh
from geode.records.models import TurnRecord
from geode.records.store_client import StoreClient
from tests.waiting import poll_for

# GitHub's documented example (docs.github.com, "Validating webhook deliveries")
GITHUB_VECTOR = (
    b"It's a Secret to Everybody",
    b"Hello, World!",
    "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def github_signature(secret: bytes, body: bytes) -> str:
    """``X-Hub-Signature-256`` as GitHub computes it: HMAC-SHA256 of the raw body, hex, ``sha256=``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def stripe_signature(secret: bytes, body: bytes, t: int) -> str:
    """``Stripe-Signature``: ``t=<unix time>,v1=<HMAC-SHA256 hex of "<t>.<body>">``."""
    mac = hmac.new(secret, str(t).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def github_headers(secret: bytes, body: bytes, delivery: str, event: str = "pull_request") -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": github_signature(secret, body),
    }


def pr_body(mark: str, **extra: Any) -> bytes:
    """A pull_request event whose selected fields carry ``mark`` (the model's answer echoes it)."""
    obj = {
        "action": "opened",
        "repository": {"full_name": f"octo/{mark}-repo"},
        "pull_request": {"title": f"{mark} fix the flaky test", "body": f"{mark}-UNSELECTED-PR-BODY"},
        **extra,
    }
    return json.dumps(obj).encode()


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    text: str

    @property
    def json(self) -> Any:
        return json.loads(self.text)


def send(url: str, body: bytes, headers: dict[str, str], method: str = "POST", timeout: float = 30) -> Reply:
    """One HTTP request on a fresh connection (http.client: every status is an answer, not an error)."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=timeout)
    try:
        path = u.path + (f"?{u.query}" if u.query else "")
        conn.request(method, path, body=body if method == "POST" else None, headers=headers)
        r = conn.getresponse()
        return Reply(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode(errors="replace"))
    finally:
        conn.close()


def send_until_2xx(
    url: str, body: bytes, headers: dict[str, str], timeout_s: float = 60
) -> list[Reply | str]:
    """A sender that retries (a refused or cut connection, a 5xx) until a 2xx, as GitHub and Stripe do;
    every attempt's answer in order (an exception's name for a connection that failed)."""
    tries: list[Reply | str] = []

    def attempt() -> bool:
        try:
            r = send(url, body, headers, timeout=10)
        except (OSError, http.client.HTTPException) as exc:
            tries.append(type(exc).__name__)
            return False
        tries.append(r)
        return 200 <= r.status < 300

    poll_for(attempt, timeout_s, interval_s=0.1, what=f"a 2xx for {headers.get('X-GitHub-Delivery', url)}")
    return tries


def status_of(base: str, reply: Reply) -> dict[str, Any]:
    """GET the status url a 2xx named (its path is relative to the listener)."""
    r = send(urljoin(base, reply.json["status_url"]), b"", {}, method="GET")
    assert r.status == 200, (r.status, r.text)
    return dict(r.json)


async def _many(reqs: Sequence[tuple[str, bytes, dict[str, str]]], connections: int) -> list[Reply]:
    out: list[Reply | None] = [None] * len(reqs)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(reqs)):
        queue.put_nowait(i)
    conn = aiohttp.TCPConnector(limit=connections, force_close=False)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=60)) as s:

        async def worker() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                url, body, headers = reqs[i]
                async with s.post(url, data=body, headers=headers) as r:
                    out[i] = Reply(r.status, {k.lower(): v for k, v in r.headers.items()}, await r.text())

        await asyncio.gather(*(worker() for _ in range(connections)))
    return [r for r in out if r is not None]


def send_concurrently(reqs: Sequence[tuple[str, bytes, dict[str, str]]], connections: int = 5) -> list[Reply]:
    """Send every request over ``connections`` keep-alive connections at once; the replies in order."""
    return asyncio.run(_many(reqs, connections))


# -- what the tree recorded -----------------------------------------------------------------------------
def intake_counts(home: GeodeHome) -> dict[str, dict[str, int]]:
    """The intake table's rows by route and state (the store's ``store.webhook.counts``)."""
    from geode.records.intake_client import IntakeClient

    with client_bus(home) as bus:
        return IntakeClient(bus.transport).counts().routes


def intake_total(home: GeodeHome, route: str) -> int:
    return sum(intake_counts(home).get(route, {}).values())


def intake_row(home: GeodeHome, route: str, delivery_id: str) -> Any:
    from geode.records.intake_client import IntakeClient

    with client_bus(home) as bus:
        return IntakeClient(bus.transport).get(route, delivery_id)


def turns_with(home: GeodeHome, mark: str) -> list[TurnRecord]:
    """Every turn record whose input holds ``mark`` (a delivery's distinctive field value)."""
    with client_bus(home) as bus:
        turns = StoreClient(bus.transport).list_turns()
    return [t for t in turns if mark in json.dumps(t.input)]


def route_counters(home: GeodeHome) -> dict[str, wh.RouteCounters]:
    got = ask_child(home, "webhooks", wh.ROUTES, wh.ListRoutes(), wh.RoutesReply, 10.0)
    assert got is not None, "the webhooks child does not answer webhooks.routes"
    return {r["name"]: wh.RouteCounters.model_validate(r["counters"]) for r in got["routes"]}


def rss_kib(pid: int) -> int:
    """The process's resident set (``VmRSS`` of /proc/<pid>/status), KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


@dataclass
class Flood:
    """A bounded local loop of malformed requests: raw HTTP/1.1 over ``connections`` keep-alive sockets."""

    host: str
    port: int
    requests: list[bytes] = field(default_factory=list)  # each a whole request (head and body)

    def run(self, n: int, connections: int = 4, timeout_s: float = 30) -> dict[int, int]:
        """Send ``n`` requests cycling through ``requests``; the count of each status seen."""
        return asyncio.run(asyncio.wait_for(self._run(n, connections), timeout_s))

    async def _run(self, n: int, connections: int) -> dict[int, int]:
        seen: dict[int, int] = {}
        todo = iter(range(n))

        async def one_connection() -> None:
            reader, writer = await asyncio.open_connection(self.host, self.port)
            try:
                for i in todo:
                    writer.write(self.requests[i % len(self.requests)])
                    status, close = await _read_reply(reader)
                    seen[status] = seen.get(status, 0) + 1
                    if close:  # the server ended the connection (an unread body): open another
                        writer.close()
                        reader, writer = await asyncio.open_connection(self.host, self.port)
            finally:
                writer.close()

        await asyncio.gather(*(one_connection() for _ in range(connections)))
        return seen


async def _read_reply(reader: asyncio.StreamReader) -> tuple[int, bool]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
    length = int(hdrs.get("content-length", "0"))
    if length:
        await reader.readexactly(length)
    return status, hdrs.get("connection", "").lower() == "close"


def raw_request(path: str, body: bytes, headers: dict[str, str], host: str = "127.0.0.1") -> bytes:
    head = [f"POST {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def wait_posts(api: Any, chat: int, n: int, timeout_s: float = 30) -> list[dict[str, Any]]:
    return poll_for(lambda: p if len(p := api.posts(chat)) >= n else None, timeout_s, what=f"{n} posts")


def marks_in(requests: Iterable[Any], mark: str) -> int:
    """How many of the model's requests hold ``mark`` anywhere."""
    return sum(1 for r in requests if mark in json.dumps(r.body))
