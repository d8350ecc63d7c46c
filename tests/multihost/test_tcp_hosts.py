"""Issue 17 (D) on one machine over tcp loopback: a main tree (`[bus] listen`, one local loop worker) and a
worker host (`geode serve --role worker`, its own GEODE_HOME and keys) sharing a scripted provider. Main's
own loop-1 is SIGSTOPped so lanes presumes it dead (missed heartbeats) and only the worker host's
`w1/loop-1` can take a turn; then the worker host is SIGKILLed mid-turn and main's loop-1 resumes it.
Issue 27: a catalogue change on main reaches `w1/loop-1`; main's global cap follows the registered workers'
capacity. Issue 28: `geode reload` on main (a new MCP server) and on the worker host (a [loop] setting) reach
`w1/loop-1`'s next turn. Each test sets up what it needs (the worker host up, main's loop-1 stopped), so any
order works."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from actors.bus.endpoints import CurveKeys
from actors.tree.client import tree_status
from geode.home import GeodeHome
from geode.protocol import codec, runtime
from geode.protocol.envelope import Envelope
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import (
    alive,
    children,
    geode,
    geode_popen,
    scripted_home,
    serve,
    settled,
    stop,
    wait_for,
)
from tests.multihost.ports import free_base_port
from tests.multihost.refused_send import send_unless_refused

SLOW = "slow-marker"
SEEN: dict[str, int] = {}
OFFERED: dict[str, list[str]] = {}  # the prompt → the tools the model was offered for it
MAX_TOKENS: dict[str, int] = {}  # the prompt → the max_tokens its request asked for
MCP_SERVER = Path(__file__).parents[1] / "tools" / "mcp_server.py"


def _reply(req: Any) -> Any:
    msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
    first = msgs[0].get("content") if msgs else ""
    text = first if isinstance(first, str) else " ".join(b.get("text", "") for b in first or [])
    SEEN[text] = SEEN.get(text, 0) + 1
    OFFERED[text] = [t.get("name", "") for t in (req.body.get("tools") or [])]
    MAX_TOKENS[text] = req.body.get("max_tokens")
    if SLOW in text and SEEN[text] == 1:
        return {"text": "never seen", "delay_s": 60.0}  # the first attempt hangs until its host dies
    return {"text": f"answer {SEEN[text]} to {text.split()[-1]}"}


class Hosts:
    def __init__(self, main: GeodeHome, worker: GeodeHome, port: int, server: ScriptedServer) -> None:
        self.main, self.worker, self.port, self.server = main, worker, port, server
        self.stopped: int | None = None  # main's loop-1, SIGSTOPped
        self.procs: list[subprocess.Popen[str]] = []  # the worker host's `serve --foreground`

    def status(self) -> dict[str, Any]:
        r = geode(self.main, "status", "--json", timeout=30)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)  # type: ignore[no-any-return]

    def workers(self) -> list[str]:
        return sorted(w["worker"] for w in (self.status()["lanes"] or {}).get("workers", []))

    def cap(self) -> tuple[int, int, bool]:
        """Lanes' global cap, the registered workers' capacity, and whether the cap follows it."""
        lanes = self.status()["lanes"] or {}
        offered = sum(int(w["capacity"]) for w in lanes.get("workers", []))
        return lanes["lanes"]["global_cap"], offered, bool(lanes["lanes"].get("global_cap_follows"))

    def ensure_worker(self) -> None:
        """The worker host up and w1/loop-1 registered (a test before may have killed it)."""
        st = tree_status(self.worker)
        if st is None or "w1/loop-1" not in self.workers():
            if st is not None:
                self.kill_worker_host()
            self.serve_worker()

    def kill_worker_host(self) -> None:
        """The whole worker host dies at once (no supervisor reports anything); main forgets it."""
        st = tree_status(self.worker)
        assert st is not None
        pids = [st.pid, *(c.pid for c in st.children if c.pid), *([st.zygote.pid] if st.zygote else [])]
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not any(alive(p) for p in pids), 10)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()

    def serve_worker(self) -> None:
        """The worker host in the foreground (as under systemd), until w1/loop-1 registered with main's
        lanes (a loaded machine forks its zygote slowly: no 30 s daemon start budget here)."""
        args = ["serve", "--role", "worker", "--connect", f"tcp://127.0.0.1:{self.port}"]
        args += ["--server-key", f"@{self.main.host_public_key}", "--host", "w1", "--foreground"]
        out = open(self.worker.root / "serve-fg.out", "ab")  # handed to the process
        self.procs.append(geode_popen(self.worker, *args, stdout=out, stderr=out))
        out.close()
        wait_for(lambda: "w1/loop-1" in self.workers(), 90, what="w1/loop-1 registered with main's lanes")
        settled(self.worker)  # its early loop worker swapped for a fork with the SDKs (actors/tree/swaps.py)

        def current() -> bool:
            listed = self.status()["hosts"]
            now = children(self.worker)["loop-1"].incarnation
            return bool(listed) and listed[0]["children"][0]["incarnation"] == now

        wait_for(current, 60, what="main's view of w1/loop-1's incarnation after the swap")

    def stop_local_worker(self) -> None:
        self.ensure_worker()
        if self.stopped is None:
            self.stopped = children(self.main)["loop-1"].pid
            assert self.stopped
            os.kill(self.stopped, signal.SIGSTOP)
        wait_for(lambda: self.workers() == ["w1/loop-1"], 60, what="lanes to presume main's loop-1 dead")

    def continue_local_worker(self) -> None:
        if self.stopped:
            os.kill(self.stopped, signal.SIGCONT)
            self.stopped = None


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
    base = tmp_path_factory.mktemp("hosts")
    server = ScriptedServer(_reply).start()
    main = scripted_home(base / "m", server)
    worker = scripted_home(base / "w", server)
    h = Hosts(main, worker, free_base_port(), server)
    try:
        for home in (main, worker):
            r = geode(home, "keys", "init")
            assert r.returncode == 0, r.stderr
        wpub = geode(worker, "keys", "show").stdout.strip()
        cfg = main.config_file.read_text().replace("workers = 2", "workers = 1")
        cfg += f'\n[bus]\nlisten = "tcp://127.0.0.1:{h.port}"\n[bus.curve]\nauthorized_keys = ["{wpub}"]\n'
        main.config_file.write_text(cfg)
        worker.config_file.write_text(worker.config_file.read_text().replace("workers = 2", "workers = 1"))
        serve(main)
        h.serve_worker()
        yield h
    finally:
        h.continue_local_worker()
        stop(worker)
        for p in h.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        stop(main)
        server.stop()


def test_status_on_main_lists_the_worker_host(hosts: Hosts) -> None:
    hosts.ensure_worker()
    listed = hosts.status()["hosts"]
    assert [(h["host"], h["address"]) for h in listed] == [("w1", "127.0.0.1")]
    (loop,) = listed[0]["children"]
    assert loop["name"] == "w1/loop-1" and loop["kind"] == "loop" and loop["last_heartbeat_s"] < 3
    assert loop["incarnation"] == children(hosts.worker)["loop-1"].incarnation
    text = geode(hosts.main, "status").stdout
    assert "hosts:" in text and "w1/loop-1#" in text
    on_worker = geode(hosts.worker, "status")  # the worker host shows its own children only
    assert on_worker.returncode == 0 and "loop-1" in on_worker.stdout and "lanes:" not in on_worker.stdout


def test_an_unknown_key_is_refused_and_logged_with_its_address(hosts: Hosts) -> None:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    stranger = CurveKeys.generate()
    sock.curve_serverkey = hosts.main.host_public_key.read_text().strip().encode()
    sock.curve_publickey, sock.curve_secretkey = stranger.public, stranger.secret
    try:
        sock.connect(f"tcp://127.0.0.1:{hosts.port}")
        send_unless_refused(sock, codec.encode(Envelope(type=runtime.PING, **{"from": "stranger#1"})))
        assert not sock.poll(700), "a peer with an unknown key got an answer"
        log = hosts.main.logs_dir / "lanes.log"
        wait_for(lambda: "rejected a CURVE client from 127.0.0.1" in log.read_text(), 10)
    finally:
        sock.close(0)
        ctx.term()


def test_a_turn_from_mains_cli_runs_on_the_worker_hosts_loop_worker(hosts: Hosts) -> None:
    hosts.stop_local_worker()
    r = geode(hosts.main, "ask", "say remote-one", "--json", timeout=90)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["text"] == "answer 1 to remote-one" and out["termination_reason"] == "natural"
    remote_log = (hosts.worker.logs_dir / "loop-1.log").read_text()
    assert f"turn {out['turn_id']} accepted" in remote_log
    assert out["turn_id"] not in (hosts.main.logs_dir / "loop-1.log").read_text()


def test_killing_the_worker_host_mid_turn_resumes_the_turn_on_another_worker(hosts: Hosts) -> None:
    hosts.stop_local_worker()
    ask = geode_popen(hosts.main, "ask", f"say {SLOW}", "--json")
    try:
        wait_for(lambda: SEEN.get(f"say {SLOW}") == 1, 60, what="the first attempt to reach the model")
        (w1,) = [c for h in hosts.status()["hosts"] for c in h["children"] if c["kind"] == "loop"]
        assert len(w1["turns_in_flight"]) == 1  # shown on main while it runs on the worker host
        hosts.continue_local_worker()
        wait_for(lambda: "loop-1" in hosts.workers(), 60, what="main's loop-1 back in the pool")
        both, offered, _ = hosts.cap()  # unset in config: the cap is what both hosts' workers offer
        assert both == offered, (both, offered)
        hosts.kill_worker_host()
        stdout, stderr = ask.communicate(timeout=90)
    finally:
        if ask.poll() is None:
            ask.kill()
            ask.wait()
    assert ask.returncode == 0, stderr
    out = json.loads(stdout)
    assert out["text"] == f"answer 2 to {SLOW}" and out["termination_reason"] == "natural"
    main_log = (hosts.main.logs_dir / "loop-1.log").read_text()
    assert f"turn {out['turn_id']} accepted (attempt 2 resume)" in main_log, main_log[-2000:]
    assert SEEN[f"say {SLOW}"] == 2  # asked once per attempt; nothing re-sent blindly
    lanes_log = (hosts.main.logs_dir / "lanes.log").read_text()
    assert "worker w1/loop-1#" in lanes_log and "silent for" in lanes_log
    # the host left: the cap shrank to main's own worker (the resumed turn above ran under it)
    assert hosts.workers() == ["loop-1"]
    cap, offered, follows = hosts.cap()
    assert cap == offered < both and follows, (cap, offered, both)


def test_the_worker_host_rejoins_with_a_new_incarnation(hosts: Hosts) -> None:
    hosts.continue_local_worker()
    if tree_status(hosts.worker) is not None:
        hosts.kill_worker_host()
    wait_for(lambda: hosts.status()["hosts"] == [], 30, what="the dead host gone from main's view")
    wait_for(lambda: hosts.workers() == ["loop-1"], 60, what="main's loop-1 alone in the pool")
    shrunk, _, _ = hosts.cap()
    hosts.serve_worker()
    (loop,) = hosts.status()["hosts"][0]["children"]
    assert loop["incarnation"] == children(hosts.worker)["loop-1"].incarnation
    wait_for(lambda: "loop-1" in hosts.workers(), 60, what="main's loop-1 in the pool")
    # its loop worker offers capacity once it carries the provider SDKs (an early fork offers none until
    # it is swapped: geode/loop/retirement.py)
    wait_for(lambda: hosts.cap()[1] > shrunk, 60, what="the rejoined host's capacity offered")
    cap, offered, follows = hosts.cap()  # grown back by the rejoined host's capacity
    assert cap == offered > shrunk and follows, (cap, offered, shrunk)


def test_a_catalogue_change_on_main_reaches_the_worker_hosts_loop_worker(hosts: Hosts) -> None:
    """An MCP server added on main (`geode reload`: main's executor reloads its hub, lanes tells the remote
    workers in their heartbeats) is offered to the model by w1/loop-1, which had cached main's catalogue
    without it — with no restart of any child."""
    hosts.stop_local_worker()
    r = geode(hosts.main, "ask", "say catalogue-before", "--json", timeout=90)
    assert r.returncode == 0, r.stderr
    assert "read_file" in OFFERED["say catalogue-before"]
    assert "mcp__t__add" not in OFFERED["say catalogue-before"]
    cfg = hosts.main.config_file.read_text()
    if "[mcp.servers.t]" not in cfg:
        cfg += f"\n[mcp.servers.t]\ncommand = {json.dumps(sys.executable)}\n"
        cfg += f"args = [{json.dumps(str(MCP_SERVER))}]\ntools = {{ add = {{}} }}\n"
        hosts.main.config_file.write_text(cfg)
    before = children(hosts.main)["executor"].incarnation
    hosts.continue_local_worker()  # every child of main confirms the reload (a stopped one cannot)
    r = geode(hosts.main, "reload", timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "executor: MCP servers: +t (next turn)" in r.stdout.splitlines()
    hosts.stop_local_worker()

    def offered() -> bool:  # the remote worker asks again after its next heartbeat (a second)
        r = geode(hosts.main, "ask", "say catalogue-after", "--json", timeout=90)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert f"turn {out['turn_id']} accepted" in (hosts.worker.logs_dir / "loop-1.log").read_text()
        return "mcp__t__add" in OFFERED["say catalogue-after"]

    wait_for(offered, 30, what="mcp__t__add offered by w1/loop-1")
    assert children(hosts.main)["executor"].incarnation == before  # reloaded in place, not restarted


def test_a_loop_setting_reloaded_on_the_worker_host_applies_to_its_next_turn(hosts: Hosts) -> None:
    """A remote loop worker follows its own host's config: `geode reload` run on the worker host."""
    hosts.stop_local_worker()
    cfg = hosts.worker.config_file.read_text()
    if "max_tokens = 2345" not in cfg:
        hosts.worker.config_file.write_text(cfg.replace("workers = 1", "workers = 1\nmax_tokens = 2345"))
    r = geode(hosts.worker, "reload", timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "loop: max_tokens 32768 → 2345 (next turn)" in r.stdout.splitlines()
    r = geode(hosts.main, "ask", "say reloaded-remote", "--json", timeout=90)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert f"turn {out['turn_id']} accepted" in (hosts.worker.logs_dir / "loop-1.log").read_text()
    assert MAX_TOKENS["say reloaded-remote"] == 2345


def test_a_remote_worker_that_hears_nothing_from_main_restarts_as_a_new_incarnation(hosts: Hosts) -> None:
    hosts.ensure_worker()
    before = children(hosts.worker)["loop-1"]
    lanes = children(hosts.main)["lanes"].pid
    assert lanes
    os.kill(lanes, signal.SIGSTOP)  # main stops answering, as over a cut link
    try:
        after = wait_for(
            lambda: (c := children(hosts.worker)["loop-1"]).incarnation > before.incarnation and c, 60
        )
    finally:
        os.kill(lanes, signal.SIGCONT)
    assert not isinstance(after, bool)
    log = (hosts.worker.logs_dir / "loop-1.log").read_text()
    assert "exiting for a new incarnation" in log
    wait_for(
        lambda: any(
            c["name"] == "w1/loop-1" and c["incarnation"] >= after.incarnation
            for h in hosts.status()["hosts"]
            for c in h["children"]
        ),
        60,
        what="the new incarnation registered with main",
    )
