"""`scripts/chaos` and `scripts/soak`: start the world, run clients (and the killer), settle, check, report.
The last line printed is the one-line summary; the exit code is 1 on any violation."""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from tests.chaos.chat import ChatRecord, chat_loop, check_chat, settle_replies
from tests.chaos.checker import Report, check, pct
from tests.chaos.driver import Record, client_loop, kill_loop, poll_loop
from tests.chaos.evidence import collect, uncertain_receipts
from tests.chaos.rig import DEFAULT_SUPERVISOR, World, read_markers, world
from tests.chaos.schedule import JobVerdict
from tests.chaos.schedule import verdict as job_verdict
from tests.chaos.soak import HeapDumps, SoakSampler

DEFAULT_CHILDREN = "store,lanes,executor,loop,control,messengers"


def _parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__)
    p.add_argument("--clients", type=int, default=4, help="concurrent clients (default 4)")
    p.add_argument("--seed", type=int, default=None, help="the killer's random seed (default: random)")
    p.add_argument("--workers", type=int, default=2, help="loop workers of the tree (default 2)")
    p.add_argument("--turn-timeout", type=float, default=60.0, help="a client gives up on a turn after this")
    p.add_argument("--settle", type=float, default=60.0, help="seconds the tree gets to settle at the end")
    p.add_argument(
        "--supervisor",
        default=DEFAULT_SUPERVISOR.replace("\n", ";").strip(";"),
        help="[supervisor] settings, ';'-separated (default: none, the shipped defaults)",
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (home, logs, markers)")
    return p


def _start(
    rec: Record, w: World, args: argparse.Namespace, stop: threading.Event, max_turns: int = 0
) -> list[threading.Thread]:
    threads = [
        threading.Thread(
            target=client_loop,
            args=(w.home, w.ws, i + 1, rec, stop, args.turn_timeout, max_turns),
            name=f"chaos-client-{i + 1}",
            daemon=True,
        )
        for i in range(args.clients)
    ]
    for t in threads:
        t.start()
    return threads


def _chat(
    w: World, chat: ChatRecord, stop: threading.Event, args: argparse.Namespace
) -> list[threading.Thread]:
    if w.api is None:
        return []
    t = threading.Thread(
        target=chat_loop, args=(w.api, w.chats, chat, stop, args.turn_timeout), name="chaos-chat", daemon=True
    )
    t.start()
    return [t]


def _finish(
    rec: Record,
    w: World,
    threads: list[threading.Thread],
    stop: threading.Event,
    args: argparse.Namespace,
    chat: ChatRecord | None = None,
    job_end: datetime | None = None,
) -> Report:
    stop.set()
    job: JobVerdict | None = None
    if job_end is not None:  # pause the job once it decided past the kills, so the tree can settle
        job = job_verdict(w, rec.kills, job_end, args.settle)
    deadline = time.monotonic() + args.turn_timeout + 30  # handshake 5 s + prompt 10 s + the turn
    for t in threads:
        t.join(timeout=max(0.1, deadline - time.monotonic()))
    sessions = sorted({op.session_id for op in rec.ops if op.session_id})
    ev = collect(w.home, sessions, settle_timeout_s=args.settle)
    unsettled = ""
    if chat is not None and w.api is not None:  # the turns are done; now every reply is posted or uncertain
        unsettled = settle_replies(w.home, chat, args.settle)
        ev.uncertain = uncertain_receipts(w.home)  # settling a reply may have made its receipt uncertain
    rep = check(rec, read_markers(w.markers), ev, rec.t_calm_end - rec.t_chaos)
    if chat is not None and w.api is not None:
        rep.add_chat(check_chat(w.api, chat, ev.uncertain, unsettled))
    if job is not None:
        rep.add_job(job)
    rep.add_stories(w.home.logs_dir)
    return rep


def _print(rep: Report, base: Path, strict: bool) -> int:
    for line in rep.lines():
        print(line)
    misses = rep.availability_misses()
    for m in misses:
        print(f"availability target missed: {m}")
    print(f"(home, logs and markers under {base})")
    print(rep.summary(), flush=True)
    return 1 if rep.violations or (strict and misses) else 0


def chaos_main(argv: list[str] | None = None) -> int:
    p = _parser("scripts/chaos")
    p.add_argument("--seconds", type=float, default=60.0, help="seconds of kills (default 60)")
    p.add_argument(
        "--calm-seconds", type=float, default=10.0, help="calm turns before the kills (default 10)"
    )
    p.add_argument("--kill-every", type=float, default=1.0, help="seconds between SIGKILLs (default 1)")
    p.add_argument(
        "--children", default=DEFAULT_CHILDREN, help=f"children to kill (default {DEFAULT_CHILDREN})"
    )
    p.add_argument("--strict-availability", action="store_true", help="also fail on the availability targets")
    p.add_argument(
        "--chats", type=int, default=2, help="Telegram chats with a user posting in each (default 2; 0: none)"
    )
    p.add_argument(
        "--schedule",
        action="store_true",
        help="also an operator job every 1s (run_bash effect, reply delivered to the first chat); the "
        "scheduler joins the children to kill; each instant must end in exactly one outcome",
    )
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    names = [n.strip() for n in args.children.split(",") if n.strip()]
    if args.schedule:
        args.chats = max(1, args.chats)
        names += [] if "scheduler" in names else ["scheduler"]
    base = Path(tempfile.mkdtemp(prefix="geode-chaos-"))
    tmp = _cleanup(base, keep=args.keep)
    print(
        f"chaos: seed {seed}, {args.clients} clients, kill every {args.kill_every}s of {names}, {base}",
        flush=True,
    )
    with (
        tmp,
        world(
            base, workers=args.workers, supervisor=_supervisor(args), chats=args.chats, job=args.schedule
        ) as w,
    ):
        rec, stop, kill_stop, poll_stop = Record(), threading.Event(), threading.Event(), threading.Event()
        rec.t_start = time.monotonic()
        poller = threading.Thread(target=poll_loop, args=(w.home, rec, poll_stop), daemon=True)
        poller.start()
        chat = ChatRecord()
        threads = _start(rec, w, args, stop) + _chat(w, chat, stop, args)
        time.sleep(args.calm_seconds)
        rec.t_chaos = time.monotonic()
        killer = threading.Thread(
            target=kill_loop, args=(rec, kill_stop, args.kill_every, names, random.Random(seed)), daemon=True
        )
        killer.start()
        time.sleep(args.seconds)
        kill_stop.set()
        killer.join(timeout=5)
        rec.t_calm_end = time.monotonic()
        job_end = datetime.now(UTC) if args.schedule else None
        try:
            # the poller samples while the tree settles
            rep = _finish(rec, w, threads, stop, args, chat, job_end)
        finally:
            poll_stop.set()
            poller.join(timeout=5)
        print(f"seed {seed}")
        return _print(rep, base, args.strict_availability)


@contextmanager
def _cleanup(base: Path, *, keep: bool) -> Iterator[None]:
    try:
        yield
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)


def _supervisor(args: argparse.Namespace) -> str:
    return "".join(f"{kv.strip()}\n" for kv in args.supervisor.split(";") if kv.strip())


def soak_main(argv: list[str] | None = None) -> int:
    p = _parser("scripts/soak")
    p.add_argument("--turns", type=int, default=10000, help="turns to run (default 10000)")
    p.add_argument("--sample-every", type=float, default=3.0, help="seconds between RSS/fd samples")
    p.add_argument("--warmup", type=int, default=200, help="turns before the growth baseline (default 200)")
    args = p.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="geode-soak-"))
    tmp = _cleanup(base, keep=args.keep)
    print(f"soak: {args.turns} turns, {args.clients} clients, no kills, {base}", flush=True)
    with tmp, world(base, workers=args.workers, supervisor=_supervisor(args)) as w:
        from actors.tree.client import tree_status

        st = tree_status(w.home)
        assert st is not None, "tree not running"
        rec, stop, poll_stop = Record(), threading.Event(), threading.Event()
        rec.t_start = rec.t_chaos = time.monotonic()
        sampler = SoakSampler(st.pid, lambda: len(rec.ops), every_s=args.sample_every)
        sampling = threading.Thread(target=sampler.run, daemon=True)
        sampling.start()
        threads = _start(rec, w, args, stop, max_turns=args.turns)
        last, dumps = 0.0, HeapDumps(st.pid, warmup=args.warmup, last=args.turns)
        while any(t.is_alive() for t in threads):
            time.sleep(1.0)
            dumps.check(len(rec.ops))
            if time.monotonic() - last > 30:
                last = time.monotonic()
                print(f"  {len(rec.ops)} turns, {time.monotonic() - rec.t_start:.0f}s", flush=True)
        rec.t_calm_end = time.monotonic()
        sampler.stop()
        sampling.join(timeout=10)
        elapsed = rec.t_calm_end - rec.t_start
        print(f"soak: {len(rec.ops)} turns in {elapsed:.0f}s ({len(rec.ops) / elapsed:.1f} turns/s)")
        for line in sampler.growth(args.warmup):
            print(line)
        done = sorted((op for op in rec.ops if op.kind == "ok"), key=lambda op: op.t_invoke)
        for label, part in (("first", done[:1000]), ("last", done[-1000:])):
            d = [op.t_end - op.t_invoke for op in part]
            print(
                f"turn latency, {label} {len(d)} turns: p50 {pct(d, 50):.2f}s p99 {pct(d, 99):.2f}s",
                flush=True,
            )
        try:
            rep = _finish(rec, w, threads, stop, args)
        finally:
            poll_stop.set()
        code = _print(rep, base, False)
        print(
            f"soak: {len(rec.ops)} turns, {len(rep.violations)} violation kinds, turn p50 "
            f"{pct(rep.turn_chaos, 50):.2f}s p99 {pct(rep.turn_chaos, 99):.2f}s"
        )
        return code
