"""Webhook intake (issue 30): 50 concurrent senders at 200 deliveries/s for 10 s (2,000 GitHub-signed
deliveries) against the real `geode serve` webhooks child, beside a plain aiohttp handler that records nothing
(the baseline, same load, same run), and the time for the queued turns to drain.

One real tree in a fresh temporary home: ``[webhooks] listen`` on a free loopback port, one route ``bench``
(auth ``github``, the secret in ``$GEODE_HOME/.env``, ``X-GitHub-Delivery`` as the delivery id,
``queue_max`` raised above the number of deliveries so none is refused, ``rate_per_minute = 0``: every sender
is 127.0.0.1), the model the offline Anthropic-wire fake (scripts/bench/fake_anthropic.py, its own process: an
instant text answer, no tools). The load: N senders, each a coroutine with its own keep-alive connection,
sender i sending its k-th delivery at ``t0 + (k * N + i) / rate`` (open loop: a late reply delays only that
sender's next send; the lateness is reported). Latency = request written → response read, per delivery, on
the sender's clock. Every geode reply must be ``202`` (a new intake, recorded in the store before the reply:
the contract of the child), and afterwards the intake table must hold every delivery (read from the child's
``webhooks.routes`` counters and directly from the records, read-only).

The baseline is an aiohttp server in a forked process answering every POST ``202`` with the same JSON shape
and recording nothing, loaded the same way while the tree is up and idle. Drain = the last ``202`` → the
intake table says every intake ``done`` (its turn answered; nothing to deliver), polled every 50 ms.

Run: .venv/bin/python scripts/bench/webhooks.py [--quick] [--senders 50] [--rate 200] [--seconds 10]
``--quick``: 2 s at the same rate (400 deliveries). Not part of scripts/test.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import multiprocessing
import os
import socket
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import lmdb
from aiohttp import web

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_anthropic import FakeProcess  # noqa: E402

from actors.cli.child_view import ask_child  # noqa: E402
from actors.cli.webhooks_view import stored_counts  # noqa: E402
from actors.tree.client import start_daemon, stop_tree  # noqa: E402
from geode.home import GeodeHome  # noqa: E402
from geode.protocol import webhooks as wh  # noqa: E402
from geode.records.intake_table import IntakeTable  # noqa: E402
from geode.records.reader import RecordReader  # noqa: E402
from geode.records.writer import GroupWriter  # noqa: E402

MODEL = "claude-sonnet-5"
SECRET = "bench-webhook-secret-0123456789"
ROUTE = "bench"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_home(home: GeodeHome, base_url: str, port: int, total: int) -> None:
    home.config_file.write_text(
        f'[providers]\nmodel = "{MODEL}"\n[providers.anthropic]\nbase_url = "{base_url}"\n\n'
        f'[webhooks]\nlisten = "127.0.0.1:{port}"\n\n'
        "[[webhooks.routes]]\n"
        f'name = "{ROUTE}"\npath = "/hooks/{ROUTE}"\nauth = "github"\nsecrets = ["BENCH_WEBHOOK_SECRET"]\n'
        'delivery_header = "X-GitHub-Delivery"\nkeep_headers = ["X-GitHub-Event"]\n'
        'prompt = "A bench event arrived. Say ok."\nfields = ["action", "n"]\n'
        f"queue_max = {total + 100}\nrate_per_minute = 0\nallowed_tools = []\n"
    )
    home.env_file.write_text(f"ANTHROPIC_API_KEY=sk-bench\nBENCH_WEBHOOK_SECRET={SECRET}\n")


# --- the baseline: a plain aiohttp handler that records nothing --------------------------------------------
def _baseline_child(port: int, ready: Any) -> None:
    async def handle(request: web.Request) -> web.Response:
        await request.read()
        turn = f"wh-{ROUTE}-{uuid.uuid4().hex[:24]}"
        return web.json_response({"turn_id": turn, "status_url": f"/status/{turn}?token=x"}, status=202)

    app = web.Application()
    app.router.add_post("/hooks/{name}", handle)

    async def run() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(run())


# --- the load -----------------------------------------------------------------------------------------------
def signed(n: int) -> tuple[bytes, dict[str, str]]:
    body = json.dumps({"action": "opened", "n": n, "pad": "x" * 200}).encode()
    sig = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": f"sha256={sig}",
    }
    return body, headers


async def load(url: str, senders: int, rate: float, seconds: float) -> dict[str, Any]:
    """Open-loop load: latencies (s) of every reply, statuses, turn ids, the sender's lateness."""
    total = int(rate * seconds)
    payloads = [signed(n) for n in range(total)]
    lat: list[float] = []
    late: list[float] = []
    statuses: dict[int, int] = {}
    turns: list[str] = []
    last_reply = [0.0]
    t0 = time.perf_counter() + 0.2

    async def sender(i: int) -> None:
        conn = aiohttp.TCPConnector(limit=1, force_close=False)
        async with aiohttp.ClientSession(connector=conn) as session:
            for n in range(i, total, senders):
                at = t0 + n / rate
                wait = at - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                else:
                    late.append(-wait)
                body, headers = payloads[n]
                s = time.perf_counter()
                async with session.post(url, data=body, headers=headers) as r:
                    got = await r.read()
                    e = time.perf_counter()
                statuses[r.status] = statuses.get(r.status, 0) + 1
                lat.append(e - s)
                last_reply[0] = max(last_reply[0], e)
                if r.status in (200, 202):
                    turns.append(json.loads(got)["turn_id"])

    await asyncio.gather(*(sender(i) for i in range(senders)))
    took = last_reply[0] - t0
    return {
        "lat": lat,
        "late": late,
        "statuses": statuses,
        "turns": turns,
        "took": took,
        "end": last_reply[0],
    }


def report(name: str, got: dict[str, Any], total: int) -> None:
    lat = got["lat"]
    late = got["late"]
    print(
        f"   {name}: {len(lat)} replies {dict(sorted(got['statuses'].items()))} in {got['took']:.2f} s "
        f"({len(lat) / max(got['took'], 1e-9):.0f}/s); latency p50 {statistics.median(lat) * 1000:.1f} ms, "
        f"p99 {pct(lat, 0.99) * 1000:.1f} ms, max {max(lat) * 1000:.1f} ms; "
        f"sends late {len(late)} of {total} (p99 {pct(late, 0.99) * 1000 if late else 0:.1f} ms)"
    )


def routes(home: GeodeHome) -> dict[str, Any] | None:
    return ask_child(home, "webhooks", wh.ROUTES, wh.ListRoutes(), wh.RoutesReply, 5.0)


def wait_up(home: GeodeHome, port: int, timeout_s: float = 120.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if routes(home) is not None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                pass
        time.sleep(0.2)
    raise SystemExit("the webhooks child did not come up")


def counters(home: GeodeHome) -> dict[str, Any]:
    got = routes(home) or {}
    return next((r["counters"] for r in got.get("routes", []) if r["name"] == ROUTE), {})


def raw_commit_p50(path: Path, n: int = 200) -> float:
    """The unit of durable write a 202 waits for (at least one, batched by the store's group writer)."""
    env = lmdb.open(str(path), map_size=1 << 26, sync=True)
    times = []
    for i in range(n):
        t = time.perf_counter()
        with env.begin(write=True) as txn:
            txn.put(b"%010d" % i, b"x" * 512)
        times.append(time.perf_counter() - t)
    env.close()
    return statistics.median(times)


def stored_rows(home: GeodeHome, limit: int) -> list[Any]:
    """The route's intake rows, read-only from the records (the tree stopped)."""
    with RecordReader.for_home(home) as reader:
        return IntakeTable(reader.renv, GroupWriter(reader.renv)).recent(ROUTE, limit)


def bench(base: Path, senders: int, rate: float, seconds: float) -> None:
    total = int(rate * seconds)
    print(f"{senders} senders at {rate:g} deliveries/s for {seconds:g} s ({total} deliveries)")
    home = GeodeHome(base / "home").ensure()
    port, base_port = free_port(), free_port()
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    baseline = ctx.Process(target=_baseline_child, args=(base_port, ready), daemon=True)
    baseline.start()
    assert ready.wait(30), "the baseline server did not start"
    with FakeProcess(str(base)) as fake:
        write_home(home, fake.base_url, port, total)
        try:
            t = time.monotonic()
            rc, msg = start_daemon(home, timeout_s=120)
            assert rc == 0, msg
            wait_up(home, port)
            print(f"   tree + webhooks child up in {time.monotonic() - t:.1f} s")
            base_got = asyncio.run(
                load(f"http://127.0.0.1:{base_port}/hooks/{ROUTE}", senders, rate, seconds)
            )
            report("baseline (plain aiohttp, records nothing)", base_got, total)
            got = asyncio.run(load(f"http://127.0.0.1:{port}/hooks/{ROUTE}", senders, rate, seconds))
            report("geode serve (each 202 after its intake is recorded)", got, total)
            accepted = got["statuses"].get(202, 0)
            c = after = counters(home)
            print(f"   after the load: counters {c}; distinct turn ids {len(set(got['turns']))}")
            end = got["end"]
            deadline = time.perf_counter() + 600
            while time.perf_counter() < deadline:
                c = counters(home)
                if c.get("done", 0) >= accepted and c.get("queued", 1) == 0:  # (RouteCounters: no "open")
                    break
                time.sleep(0.05)
            drained = time.perf_counter() - end
            overall = drained + got["took"]
            left = after.get("queued")
            print(
                f"   drain: every queued turn done {drained:.1f} s after the last 202 ({left} open then); "
                f"{accepted} turns in {overall:.1f} s from the first send: {accepted / overall:.0f} turns/s"
            )
        finally:
            stop_tree(home)
    baseline.terminate()
    stored = stored_counts(home).get(ROUTE, {})
    rows = stored_rows(home, total + 100)
    missing = set(got["turns"]) - {r.turn_id for r in rows}
    ends: dict[str, int] = {}
    for r in rows:
        ends[r.termination_reason or "-"] = ends.get(r.termination_reason or "-", 0) + 1
    print(
        f"   the intake table after stop: {stored} ({len(rows)} rows for {accepted} accepted; "
        f"a 202's turn id not in the table: {len(missing)}); termination reasons {ends}"
    )
    commit = raw_commit_p50(base / "raw")
    print(f"   a raw LMDB sync commit (1 put) on this disk, p50: {commit * 1000:.2f} ms")
    lat, blat = got["lat"], base_got["lat"]
    p99 = pct(lat, 0.99)
    print(
        f"   => 202 p50 {statistics.median(lat) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms "
        f"(target p99 <= 50 ms: {'met' if p99 <= 0.050 else 'MISSED'}); baseline p50 "
        f"{statistics.median(blat) * 1000:.1f} ms, p99 {pct(blat, 0.99) * 1000:.1f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="2 s instead of 10 s")
    ap.add_argument("--senders", type=int, default=50)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    seconds = 2.0 if args.quick else args.seconds
    print(f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="geode-webhooks-bench-") as tmp:
        bench(Path(tmp), args.senders, args.rate, seconds)
    print(f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} at the end")


if __name__ == "__main__":
    main()
