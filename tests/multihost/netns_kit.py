"""The network-namespace test bed for the multi-host tests: scripts/netns-hosts brings up geode-main/w1/w2,
this kit starts the scripted provider on main's address, the main tree and the worker hosts in them, runs the
CLI in a namespace, and tears everything down (trees, namespaces) even when a test fails."""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geode.home import GeodeHome
from geode.testing.scripted import ScriptedServer
from tests.waiting import poll_for

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "netns-hosts"
PORT = 7700  # main's [bus] listen base: lanes = PORT, store = PORT + 1, executor = PORT + 2
CLONE_NEWNET = 0x40000000
FAST = """
[supervisor]
backoff_base_s = 0.05
backoff_max_s = 0.2
stable_s = 1.0
"""


def unavailable() -> str | None:
    """Why the bed cannot run here (a skip reason), or None."""
    if sys.platform != "linux":
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "the multi-host bed needs root (ip netns); run as root, as CI does"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed"
    if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        return "`ip netns` is unavailable"
    return None


def bind_in_netns(ns: str, start: Callable[[], Any]) -> Any:
    """Run ``start`` (which binds sockets) on a thread that entered namespace ``ns``: the sockets it binds
    live there, while this process stays in the root namespace."""
    out: dict[str, Any] = {}

    def enter() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            with open(f"/run/netns/{ns}", "rb") as f:
                if libc.setns(f.fileno(), CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns({ns})")
            out["value"] = start()
        except BaseException as exc:
            out["error"] = exc

    t = threading.Thread(target=enter, name=f"netns-{ns}")
    t.start()
    t.join(30)
    if "error" in out:
        raise out["error"]
    return out["value"]


@dataclass
class Host:
    name: str
    ns: str
    address: str
    home: GeodeHome


@dataclass
class Bed:
    """A bed brought up by scripts/netns-hosts (unique names per ``suffix``)."""

    suffix: str
    dir: Path
    hosts: dict[str, Host]

    @classmethod
    def up(cls, suffix: str | None = None) -> Bed:
        suffix = suffix if suffix is not None else secrets.token_hex(3)
        r = subprocess.run(
            [sys.executable, str(SCRIPT), "up", "--suffix", suffix, "--json"], capture_output=True, text=True
        )
        assert r.returncode == 0, r.stdout + r.stderr
        st = json.loads(r.stdout)
        hosts = {
            h: Host(h, d["ns"], d["address"], GeodeHome(Path(d["home"])).ensure())
            for h, d in st["hosts"].items()
        }
        return cls(suffix, Path(st["dir"]), hosts)

    def script(self, *args: str) -> None:
        r = subprocess.run(
            [sys.executable, str(SCRIPT), *args, "--suffix", self.suffix], capture_output=True, text=True
        )
        assert r.returncode == 0, r.stdout + r.stderr

    def down(self) -> None:
        """Remove the bed; GEODE_NETNS_KEEP=1 keeps the hosts' homes (their logs) to read after a failure."""
        self.script("down", *(["--keep"] if os.environ.get("GEODE_NETNS_KEEP") == "1" else []))

    def cut(self, host: str) -> None:
        self.script("cut", host)

    def restore(self, host: str) -> None:
        self.script("restore", host)

    def env(self, host: str) -> dict[str, str]:
        return {**os.environ, "GEODE_HOME": str(self.hosts[host].home.root), "PYTHONPATH": str(ROOT)}

    def argv(self, host: str, *cmd: str) -> list[str]:
        return ["ip", "netns", "exec", self.hosts[host].ns, *cmd]

    def geode(
        self, host: str, *args: str, timeout: float = 60, cwd: Path = ROOT
    ) -> subprocess.CompletedProcess[str]:
        """The CLI, run inside ``host``'s namespace with its GEODE_HOME."""
        return subprocess.run(
            self.argv(host, sys.executable, "-m", "actors.cli.main", *args),
            env=self.env(host),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def geode_popen(self, host: str, *args: str, cwd: Path = ROOT) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(host, sys.executable, "-m", "actors.cli.main", *args),
            env=self.env(host),
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def python(
        self, host: str, code: str, *args: str, timeout: float = 30
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(host, sys.executable, "-c", code, *args),
            env=self.env(host),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start_provider(self, reply: Any) -> ScriptedServer:
        """The scripted provider, listening on main's address inside main's namespace."""
        main = self.hosts["main"]
        return bind_in_netns(main.ns, lambda: ScriptedServer(reply, host=main.address).start())  # type: ignore[no-any-return]


def provider_config(server: ScriptedServer) -> str:
    return f"""
[providers]
model = "claude-sonnet-5"
[providers.anthropic]
base_url = "{server.base_url}"
"""


@dataclass
class Worker:
    """A worker host to serve: its children (``loop``, ``executor``, ``loop,executor``) and settings."""

    host: str
    children: str
    roots: tuple[Path, ...] = ()
    loop_workers: int = 1
    capacity: int = 2


@dataclass
class Cluster:
    """A main tree and worker hosts running in a bed."""

    bed: Bed
    server: ScriptedServer
    ws: Path
    keys: dict[str, str] = field(default_factory=dict)  # host -> public key (z85)
    started: list[str] = field(default_factory=list)

    @property
    def main(self) -> GeodeHome:
        return self.bed.hosts["main"].home

    def keys_init(self, host: str) -> str:
        r = self.bed.geode(host, "keys", "init", "--force")
        assert r.returncode == 0, r.stdout + r.stderr
        pub = (self.bed.hosts[host].home.root / "keys" / "host.pub").read_text().strip()
        self.keys[host] = pub
        return pub

    def write_config(self, host: str, extra: str) -> None:
        home = self.bed.hosts[host].home
        home.config_file.write_text(FAST + provider_config(self.server) + extra)
        home.env_file.write_text("ANTHROPIC_API_KEY=sk-test-key\n")

    def serve_main(self, loop_workers: int, capacity: int = 2, extra: str = "") -> None:
        authorized = ", ".join(f'"{self.keys[h]}"' for h in self.keys if h != "main")
        cfg = f"""
[loop]
workers = {loop_workers}
capacity = {capacity}
[tools]
roots = ["{self.ws}"]
[bus]
listen = "tcp://{self.bed.hosts["main"].address}:{PORT}"
[bus.curve]
authorized_keys = [{authorized}]
"""
        self.write_config("main", cfg + extra)
        r = self.bed.geode("main", "serve", timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        self.started.append("main")

    def serve_workers(self, *workers: Worker) -> None:
        """`geode serve --role worker` on each host at once (each returns once its tree is up)."""
        main_pub = self.bed.hosts["main"].home.root / "keys" / "host.pub"
        procs = []
        for w in workers:
            self.write_config(w.host, f"[loop]\nworkers = {w.loop_workers}\ncapacity = {w.capacity}\n")
            args = ["--role", "worker", "--connect", f"tcp://{self.bed.hosts['main'].address}:{PORT}"]
            args += ["--server-key", f"@{main_pub}", "--children", w.children, "--host", w.host]
            args += ["--roots", ",".join(str(r) for r in w.roots)] if w.roots else []
            procs.append((w.host, self.bed.geode_popen(w.host, "serve", *args)))
        for host, p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, f"serve on {host}: {out}{err}"
            self.started.append(host)

    def status(self, host: str = "main") -> dict[str, Any]:
        r = self.bed.geode(host, "status", "--json", timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
        return dict(json.loads(r.stdout))

    def host_children(self, host: str) -> dict[str, dict[str, Any]]:
        """``host``'s children as main's `geode status --json` lists them under ``hosts``, by name."""
        for h in self.status().get("hosts", []):
            if h.get("host", h.get("name")) == host:
                return {str(c["name"]): c for c in h.get("children", [])}
        return {}

    def wait_host(
        self, host: str, pred: Callable[[dict[str, dict[str, Any]]], bool], timeout_s: float = 30
    ) -> dict[str, dict[str, Any]]:
        def seen() -> dict[str, dict[str, Any]]:
            kids = self.host_children(host)
            return kids if kids and pred(kids) else {}

        return poll_for(
            seen, timeout_s, interval_s=0.3, what=f"host {host} in main's status", swallow=(Exception,)
        )

    def ask(self, prompt: str, *more: str, timeout: float = 120) -> dict[str, Any]:
        r = self.bed.geode(
            "main",
            "ask",
            prompt,
            "--json",
            "--dangerously-skip-permissions",
            *more,
            cwd=self.ws,
            timeout=timeout,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        return dict(json.loads(r.stdout))

    def logs(self, host: str = "main") -> str:
        d = self.bed.hosts[host].home.logs_dir
        return "\n".join(p.read_text(errors="replace") for p in sorted(d.glob("*.log"))) if d.exists() else ""

    def stop_all(self) -> None:
        """`geode stop` on the worker hosts at once, then on main; the bed's `down` kills what remains."""
        workers = [self.bed.geode_popen(h, "stop") for h in self.started if h != "main"]
        for p in workers:
            try:
                p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
        if "main" in self.started:
            try:
                self.bed.geode("main", "stop", timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.started.clear()


@contextmanager
def cluster(base: Path, reply: Any) -> Iterator[Cluster]:
    """A bed with keys on every host and the provider on main's address; nothing served yet (the test picks
    main's and the workers' children). Stops the trees and removes the namespaces on exit."""
    bed = Bed.up()
    server: ScriptedServer | None = None
    c: Cluster | None = None
    try:
        server = bed.start_provider(reply)
        ws = base / "ws"
        ws.mkdir(parents=True, exist_ok=True)
        c = Cluster(bed, server, ws)
        for h in bed.hosts:
            c.keys_init(h)
        yield c
    finally:
        if c is not None:
            c.stop_all()
        if server is not None:
            server.stop()
        bed.down()
