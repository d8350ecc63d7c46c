"""The control socket's own checks (issue 10, finding 5): only the daemon's uid gets a frame through (ZAP on
the kernel's peer credentials), and a socket directory that is not private is refused at bind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from actors.control import ControlSocket, peer_uid
from geode.home import GeodeHome
from geode.protocol import codec
from geode.protocol.envelope import Envelope

NOBODY = 65534
AS_NOBODY = f"""
import os, sys, zmq
os.setgid({NOBODY}); os.setuid({NOBODY})
ctx = zmq.Context()
d = ctx.socket(zmq.DEALER)
d.setsockopt(zmq.LINGER, 0)
d.connect(sys.argv[1])
d.send(bytes.fromhex(sys.argv[2]))
print("reply" if d.poll(1500) else "no reply", flush=True)
os._exit(0)
"""


class FakeCore:
    def __init__(self) -> None:
        self.frames: list[tuple[str, bytes]] = []
        self.seen = threading.Event()

    def on_frame(self, conn_id: str, frame: bytes) -> None:
        self.frames.append((conn_id, frame))
        self.seen.set()

    def disconnect(self, conn_id: str) -> None:
        pass


@pytest.fixture
def sock() -> Iterator[tuple[ControlSocket, FakeCore]]:
    root = Path(tempfile.mkdtemp(prefix="geode-ctl-"))  # under /tmp: reachable by another uid once opened
    s = ControlSocket(GeodeHome(root))
    core = FakeCore()
    s.start(core)  # type: ignore[arg-type]
    yield s, core
    s.stop()
    shutil.rmtree(root, ignore_errors=True)


def _frame() -> bytes:
    return codec.encode(Envelope(type="cli.ping", body={}))


def test_peer_uid_is_read_from_the_ipc_address() -> None:
    assert peer_uid(b"localhost:1000:1000:4242") == 1000
    assert peer_uid(b"") is None and peer_uid(b"localhost") is None and peer_uid(b"a:b:c:d") is None


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another uid")
def test_another_uid_cannot_get_a_frame_through_even_with_an_open_socket_file(
    sock: tuple[ControlSocket, FakeCore],
) -> None:
    s, core = sock
    os.chmod(s.path.parent, 0o777)  # as if the file modes had failed: the uid check still holds
    os.chmod(s.path, 0o777)
    out = subprocess.run(
        [sys.executable, "-c", AS_NOBODY, f"ipc://{s.path}", _frame().hex()],
        capture_output=True,
        text=True,
        timeout=30,
    )  # a fresh interpreter: imports as root, then drops to nobody before any socket exists
    assert out.returncode == 0 and out.stdout.strip() == "no reply", out.stderr
    assert core.frames == [] and s.gate is not None and s.gate.rejected >= 1
    ctx = zmq.Context()
    d = ctx.socket(zmq.DEALER)
    d.setsockopt(zmq.LINGER, 0)
    d.connect(f"ipc://{s.path}")
    d.send(_frame())
    try:
        assert core.seen.wait(5)  # our own uid gets through
    finally:
        d.close(0)
        ctx.term()


def test_a_socket_directory_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to hand the directory to another uid")
    root = tmp_path / "home"
    root.mkdir()
    os.chown(root, NOBODY, NOBODY)
    s = ControlSocket(GeodeHome(root))
    with pytest.raises(RuntimeError, match="refusing to serve"):
        s.start(FakeCore())  # type: ignore[arg-type]
    assert not (root / "cli.sock").exists()
