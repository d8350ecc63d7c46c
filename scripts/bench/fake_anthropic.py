"""A timed Anthropic-wire fake for the benchmarks, run in its own process: each turn (tagged in its prompt)
gets K read-only tool rounds then a text, and every request's arrival and reply-written times are recorded.

The prompt carries ``bench-turn-<tag> k=<K>``; the fake calls the first read-only tool the request offers
(``glob_files`` for ``data-<round>.txt``, else ``read_file``/``list_dir`` on ``target``), and answers
``done <tag>`` once the conversation holds K tool rounds since the prompt. Built on
geode/testing/scripted.py (same wire, TCP_NODELAY); times are ``time.monotonic()``, one clock for every
process on the machine.
"""

from __future__ import annotations

import itertools
import multiprocessing
import re
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from geode.testing.scripted import ScriptedServer, _Handler, _QuietServer

TAG = re.compile(r"bench-turn-([A-Za-z0-9_.-]+)(?:\s+k=(\d+))?")
# read-only tools by preference: (tool name, key of the path argument)
READ_TOOLS = (
    ("glob_files", "pattern"),  # both GEODEs have it: ``data-<i>.txt`` finds one file a round
    ("read_file", "file_path"),
    ("read_file", "path"),
    ("file_read", "path"),
    ("list_dir", "path"),
    ("list_directory", "path"),
)


@dataclass
class Hit:
    """One model request as the fake saw it. ``main``: the first request of (tag, round); other requests of
    the same turn (a host's side calls: reflection, judge, titles) have ``main`` False."""

    tag: str
    round: int
    t_in: float
    t_out: float
    main: bool
    stream: bool
    n_messages: int
    body_bytes: int
    tool: str = ""  # the tool the reply called ("" for a text reply)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict))


def _has_tool_result(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def pick_tool(
    tools: list[dict[str, Any]], target: str, i: int, prefer: str = ""
) -> tuple[str, dict[str, Any]] | None:
    """The first read-only tool of READ_TOOLS (``prefer`` first) the request offers, with its input for
    round ``i``."""
    offered = {t.get("name"): t for t in tools if isinstance(t, dict)}
    order = sorted(READ_TOOLS, key=lambda nk: nk[0] != prefer)
    for name, key in order:
        spec = offered.get(name)
        if spec is None:
            continue
        props = (spec.get("input_schema") or {}).get("properties") or {}
        if key not in props:
            continue
        args: dict[str, Any] = {key: target if key != "pattern" else f"data-{i}.txt"}
        if name == "read_file" and "offset" in props and "limit" in props:
            args.update(offset=i + 1, limit=1)
        return name, args
    return None


class ToolRounds:
    """The reply function: ``delay_s`` before each main reply (the model's latency)."""

    def __init__(self, target: str, delay_s: float = 0.0, prefer: str = "") -> None:
        self.target, self.delay_s, self.prefer = target, delay_s, prefer
        self.local = threading.local()
        self.lock = threading.Lock()
        self.seen: set[tuple[str, int]] = set()
        self.unmatched = 0

    def __call__(self, req: Any) -> Any:
        body = req.body if isinstance(req.body, dict) else {}
        msgs = body.get("messages") or []
        done, prompt = (
            0,
            "",
        )  # tool rounds since the turn's prompt (the last user message that is not results)
        for msg in msgs:
            if _has_tool_result(msg.get("content")):
                done += 1
            elif msg.get("role") == "user":
                done, prompt = 0, _text(msg.get("content"))
        m = TAG.search(prompt)
        if m is None:
            self.local.key = None
            with self.lock:
                self.unmatched += 1
            return {"text": "ok"}
        tag, k = m.group(1), int(m.group(2) or 0)
        with self.lock:
            main = (tag, done) not in self.seen
            self.seen.add((tag, done))
        stream = bool(getattr(req, "stream", False))
        self.local.key = (tag, done, main, len(msgs), stream, "")
        delay = self.delay_s if main else 0.0
        if done >= k or not main:
            return {"text": f"done {tag}", "delay_s": delay}
        tool = pick_tool(body.get("tools") or [], self.target, done, self.prefer)
        self.local.key = (tag, done, main, len(msgs), stream, tool[0] if tool else "")
        if tool is None:
            return {"text": f"no read-only tool offered ({tag})", "delay_s": delay}
        return {
            "tool_calls": [{"id": f"toolu_{tag}_{done}", "name": tool[0], "input": tool[1]}],
            "delay_s": delay,
        }


class TimedServer(ScriptedServer):
    """A ScriptedServer whose handler notes when each request arrived and when its reply was written."""

    def __init__(self, reply: ToolRounds) -> None:
        super().__init__(reply)
        self.rounds = reply
        self.hits: list[Hit] = []
        self.hits_lock = threading.Lock()

    def start(self) -> TimedServer:
        handler = type("TimedHandler", (_TimedHandler,), {"server_ref": self})
        self._httpd = _QuietServer((self._host, self._port), handler)
        self._httpd.daemon_threads = True
        self._httpd.request_queue_size = 512  # 100 sessions connect at once
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name="timed-fake", daemon=True
        )
        self._thread.start()
        return self


class _TimedHandler(_Handler):
    server_ref: TimedServer

    def do_POST(self) -> None:
        t_in = time.monotonic()
        srv = self.server_ref
        srv.rounds.local.key = None
        super().do_POST()
        t_out = time.monotonic()
        key = srv.rounds.local.key
        if key is None:
            return
        tag, rnd, main, n_msgs, stream, tool = key
        size = int(self.headers.get("content-length") or 0)
        with srv.hits_lock:
            srv.hits.append(Hit(tag, rnd, t_in, t_out, main, stream, n_msgs, size, tool))

    do_GET = do_POST


def _child(conn: Connection, target: str, delay_s: float, prefer: str) -> None:
    srv = TimedServer(ToolRounds(target, delay_s, prefer)).start()
    conn.send(srv.base_url)
    while True:
        cmd = conn.recv()
        if cmd == "collect":
            with srv.hits_lock:
                hits, srv.hits = srv.hits, []
            conn.send(([h.__dict__ for h in hits], srv.rounds.unmatched))
        elif cmd == "stop":
            srv.stop()
            conn.send("stopped")
            return


class FakeProcess:
    """The fake in a forked child (its threads do not share the benchmark's GIL). ``collect()`` returns and
    clears the hits so far."""

    def __init__(self, target: str, delay_s: float = 0.0, prefer: str = "") -> None:
        ctx = multiprocessing.get_context("fork")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_child, args=(child, target, delay_s, prefer), daemon=True)
        self._proc.start()
        if not self._conn.poll(30):
            raise RuntimeError("the fake did not start")
        self.base_url: str = self._conn.recv()
        self.pid: int = self._proc.pid or 0

    def collect(self) -> tuple[list[Hit], int]:
        self._conn.send("collect")
        raw, unmatched = self._conn.recv()
        return [Hit(**h) for h in raw], unmatched

    def stop(self) -> None:
        try:
            self._conn.send("stop")
            self._conn.poll(5)
        except (BrokenPipeError, EOFError, OSError):
            pass
        self._proc.join(5)
        if self._proc.is_alive():
            self._proc.kill()

    def __enter__(self) -> FakeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def turn_gaps(hits: list[Hit]) -> dict[str, list[float]]:
    """Per tag, the host gaps: reply to main round i written → main round i+1's request arrived (s)."""
    by_tag: dict[str, list[Hit]] = {}
    for h in hits:
        if h.main:
            by_tag.setdefault(h.tag, []).append(h)
    out: dict[str, list[float]] = {}
    for tag, hs in by_tag.items():
        hs.sort(key=lambda h: h.round)
        out[tag] = [b.t_in - a.t_out for a, b in itertools.pairwise(hs) if b.round == a.round + 1]
    return out
