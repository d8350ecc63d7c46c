"""Test harness: the store in-process (LocalTransport) or as a real child process reached over the bus."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from geode.home import GeodeHome
from geode.protocol import runtime
from geode.protocol.errors import GeodeError
from geode.protocol.transport import LocalTransport
from geode.records.engine import RecordEngine
from geode.records.service import StoreService
from geode.records.settings import StoreConfig
from geode.records.store_client import StoreClient
from tests.processes import Child
from tests.waiting import poll_for

ROOT = Path(__file__).resolve().parents[2]


def write_config(home: GeodeHome, store: dict[str, object]) -> None:
    lines = ["[store]"] + [f"{k} = {v!r}" for k, v in store.items()]
    home.config_file.write_text("\n".join(lines) + "\n")


def spawn_store(home: GeodeHome, incarnation: int = 1, *, wait: bool = True) -> Child:
    """``python -m actors.tree.child_main store`` for ``home``; returns once it printed ready."""
    env = {
        **os.environ,
        "GEODE_HOME": str(home.root),
        "GEODE_CHILD_NAME": "store",
        "GEODE_INCARNATION": str(incarnation),
    }
    env.pop("GEODE_READY_FD", None)
    p = Child(
        [sys.executable, "-m", "actors.tree.child_main", "store"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if wait:
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        if line != "ready":
            p.kill()
            _out, err = p.communicate()
            raise AssertionError(f"store did not start: {line!r} {err}")
    return p


def wait_answering(client: StoreClient, incarnation: int, within_s: float = 10.0) -> None:
    def answered() -> bool:
        reply = client.transport.call(client.target, runtime.PING, timeout_s=0.5)
        return bool(reply["incarnation"] == incarnation)

    what = f"the store answering as #{incarnation}"
    poll_for(answered, within_s, interval_s=0.01, what=what, swallow=(GeodeError,))


@dataclass
class LocalStore:
    engine: RecordEngine
    client: StoreClient
    kind: str = "local"

    def close(self) -> None:
        self.engine.close()


def local_store(home: GeodeHome, config: StoreConfig | None = None) -> LocalStore:
    engine = RecordEngine.for_home(home, config).open()
    transport = LocalTransport({"store": StoreService(engine)}, sender="test#1")
    return LocalStore(engine, StoreClient(transport))


@pytest.fixture(name="store")
def lone_store(tmp_path: Path) -> Iterator[LocalStore]:
    """A module's ``store`` fixture (imported there): an in-process store on a fresh home, closed after."""
    s = local_store(GeodeHome(tmp_path / "h").ensure())
    try:
        yield s
    finally:
        s.close()
