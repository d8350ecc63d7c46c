"""Fixtures: ``store`` runs each conformance test in-process and through the bus against a store child."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.records.engine import RecordEngine
from geode.records.store_client import StoreClient
from tests.records.harness import local_store, spawn_store


@dataclass
class StoreUnderTest:
    kind: str  # "local" (LocalTransport) | "inproc" (single-process bus) | "bus" (store child process)
    client: StoreClient
    home: GeodeHome
    engine: RecordEngine | None = None  # only in-process


@pytest.fixture
def home(tmp_path: Path) -> GeodeHome:
    return GeodeHome(tmp_path / "h").ensure()


@pytest.fixture(scope="module")
def bus_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, StoreClient]]:
    home = GeodeHome(tmp_path_factory.mktemp("bus") / "h").ensure()
    proc: subprocess.Popen[str] = spawn_store(home)
    bus = Bus("tester", 1, home).start()
    try:
        yield home, StoreClient(bus.transport, timeout_s=10.0)
    finally:
        bus.stop()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def inproc_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, StoreClient]]:
    """Single-process mode: the store child's builder on an inproc bus in this process."""
    from actors.store import start_store

    home = GeodeHome(tmp_path_factory.mktemp("inproc") / "h").ensure()
    server = Bus("store", 1, home, single_process=True).start()
    child = start_store(home, bus=server, concurrency=8)
    client = Bus("tester", 1, home, single_process=True).start()
    try:
        yield home, StoreClient(client.transport, timeout_s=10.0)
    finally:
        client.stop()
        server.stop()
        child.stop()


@pytest.fixture(params=["local", "inproc", "bus"])
def store(request: pytest.FixtureRequest, home: GeodeHome) -> Iterator[StoreUnderTest]:
    if request.param == "local":
        ls = local_store(home)
        yield StoreUnderTest("local", ls.client, home, ls.engine)
        ls.close()
    elif request.param == "inproc":
        ihome, client = request.getfixturevalue("inproc_store")
        yield StoreUnderTest("inproc", client, ihome)
    else:
        bhome, client = request.getfixturevalue("bus_store")
        yield StoreUnderTest("bus", client, bhome)


@pytest.fixture
def uid() -> str:
    """A unique prefix: the bus store is shared by a module's tests, so ids must never collide."""
    import uuid

    return uuid.uuid4().hex[:10]
