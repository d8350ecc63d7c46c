"""Real processes for control/lanes acceptance: store, lanes, control (``child_main``), scripted workers.

The test plays the supervisor: it starts each child with its incarnation, SIGKILLs and restarts them, and
tells lanes ``runtime.child_died`` after a kill (the supervision path).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from actors.bus import Bus
from actors.cli.client import ControlClient
from actors.cli.daemon_start import control_answers
from geode.home import GeodeHome
from geode.protocol import lanes as lanes_msg
from geode.protocol import runtime
from geode.protocol.errors import GeodeError

ROOT = Path(__file__).resolve().parents[2]


class Procs:
    def __init__(self, tmp: Path, config: str = "") -> None:
        self.home = GeodeHome(tmp / "h").ensure()
        self.home.config_file.write_text(config)
        self.effects = tmp / "effects.log"
        self.effects.touch()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.inc: dict[str, int] = {}
        self.env = {
            **os.environ,
            "GEODE_HOME": str(self.home.root),
            "PYTHONPATH": str(ROOT),
            "GEODE_TEST_EFFECTS": str(self.effects),
            "PYTHONUNBUFFERED": "1",
        }
        for k in ("GEODE_READY_FD", "GEODE_SUPERVISOR_PID"):
            self.env.pop(k, None)
        self.bus = Bus("test-sup", 1, self.home).start()

    def start(self, name: str) -> None:
        self.inc[name] = self.inc.get(name, 0) + 1
        env = {**self.env, "GEODE_CHILD_NAME": name, "GEODE_INCARNATION": str(self.inc[name])}
        if name.startswith("loop-"):
            argv = [sys.executable, "-m", "tests.control.proc_worker", name, str(self.inc[name])]
        else:
            argv = [sys.executable, "-m", "actors.tree.child_main", name]
        log = open(self.home.logs_dir / f"test-{name}.log", "ab")
        self.procs[name] = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def up(self, *workers: str) -> Procs:
        """Start the children and wait for them; a start that fails kills what it started (the children run
        without a supervisor pid, so nothing else would: a failed start under load left three for 80 min)."""
        try:
            for name in ("store", "lanes", "control", *workers):
                self.start(name)
            self.wait_ready(*workers)
        except BaseException:
            self.close()
            raise
        return self

    def wait_ready(self, *workers: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                st = self.lanes_status()
                names = {w["worker"] for w in st["workers"]}
                if set(workers) <= names and control_answers(self.home, 0.5):
                    return
            except GeodeError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"tree not ready; logs in {self.home.logs_dir}: {self.logs()}")

    def lanes_status(self) -> dict[str, Any]:
        return self.bus.transport.call("lanes", lanes_msg.LANES_STATUS, {}, timeout_s=1.0)

    def kill(self, name: str, *, notify: bool = True) -> None:
        p = self.procs.pop(name)
        p.send_signal(signal.SIGKILL)
        p.wait(5)
        if notify and name != "lanes":
            try:
                self.bus.transport.call(
                    "lanes",
                    runtime.CHILD_DIED,
                    runtime.ChildDied(name=name, incarnation=self.inc[name], reason="SIGKILL"),
                )
            except GeodeError:
                pass

    def alive(self, name: str) -> bool:
        return name in self.procs and self.procs[name].poll() is None

    def client(self, **handshake: Any) -> ControlClient:
        cl = ControlClient(self.home)
        cl.connect(**handshake)
        return cl

    def geode(self, *args: str, timeout: float = 60.0, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "actors.cli.main", *args],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=stdin,
        )

    def effect_lines(self) -> list[str]:
        return self.effects.read_text().splitlines()

    def logs(self) -> str:
        out = []
        for p in sorted(self.home.logs_dir.glob("*.log")):
            out.append(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}")
        return "\n".join(out)

    def close(self) -> None:
        for p in self.procs.values():
            p.send_signal(signal.SIGKILL)
        for p in self.procs.values():
            p.wait(5)
        self.procs.clear()
        self.bus.stop()
