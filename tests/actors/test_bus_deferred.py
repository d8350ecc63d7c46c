"""Deferred replies: a handler returns a ``Later``, another thread completes it; no handler thread waits."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.bus import Bus, inbound
from geode.home import GeodeHome
from geode.protocol.errors import Conflict, RemoteError, RequestTimeout
from geode.protocol.later import Later
from geode.protocol.transport import Request
from tests.actors.bus_fixtures import BOOM, ECHO
from tests.waiting import poll_for


class DeferringService:
    """``test.echo`` replies later (when the test completes its ``Later``); ``test.boom`` fails later."""

    def __init__(self, inline: bool = False) -> None:
        self.inline_types = frozenset({ECHO, BOOM}) if inline else frozenset()
        self.waiting: list[tuple[Request, Later]] = []
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def handle(self, request: Request) -> Later:
        later = Later()
        with self._lock:
            self.threads.add(threading.current_thread().name)
            self.waiting.append((request, later))
        return later

    def complete_all(self, reply: Any = None, error: BaseException | None = None) -> int:
        with self._lock:
            waiting, self.waiting = self.waiting, []
        for request, later in waiting:
            if error is not None:
                later.fail(error)
            else:
                later.resolve(reply if reply is not None else {"text": request.body.text})  # type: ignore[attr-defined]
        return len(waiting)


@pytest.fixture
def buses(tmp_path: Path) -> Iterator[tuple[Bus, Bus]]:
    home = GeodeHome(tmp_path / "h").ensure()
    server = Bus("srv", 1, home, single_process=True).start()
    client = Bus("cli", 1, home, single_process=True).start()
    try:
        yield server, client
    finally:  # wait for the sockets to close: the next case binds the same inproc name in this process
        client.stop(timeout_s=15.0)
        server.stop(timeout_s=15.0)


@pytest.mark.parametrize("inline", [False, True], ids=["pool", "inline"])
def test_many_deferred_replies_complete_from_another_thread_with_one_handler_thread(
    buses: tuple[Bus, Bus], inline: bool
) -> None:
    server, client = buses
    svc = DeferringService(inline=inline)
    server.serve("later", svc, concurrency=1)  # one handler thread, 20 requests outstanding at once
    call = client.transport.call_nowait
    results = [call("later", ECHO, {"text": f"m{i}"}, timeout_s=10) for i in range(20)]
    poll_for(lambda: len(svc.waiting) == 20, 5, what="all 20 handled while none was answered")
    done = threading.Thread(target=svc.complete_all, name="completer")
    done.start()
    assert [r()["text"] for r in results] == [f"m{i}" for i in range(20)]
    done.join(5)
    assert svc.threads == ({"bus-srv"} if inline else {"later-handlers-0"})
    assert not server._deferred  # every handle is gone once answered


def test_a_deferred_failure_is_the_callers_named_error(buses: tuple[Bus, Bus]) -> None:
    server, client = buses
    svc = DeferringService()
    server.serve("later", svc)
    pending = client.transport.call_nowait("later", ECHO, {"text": "x"}, timeout_s=10)
    poll_for(lambda: svc.waiting, 5, what="the request to be handled")
    svc.complete_all(error=Conflict("already stored"))
    with pytest.raises(Conflict, match="already stored"):
        pending()
    pending = client.transport.call_nowait("later", BOOM, {}, timeout_s=10)
    poll_for(lambda: svc.waiting, 5, what="the request to be handled")
    svc.complete_all(error=ZeroDivisionError("bug"))  # a bug: `internal`, and the bus lives on
    with pytest.raises(RemoteError, match="ZeroDivisionError"):
        pending()
    pending = client.transport.call_nowait("later", ECHO, {"text": "after"}, timeout_s=10)
    poll_for(lambda: svc.waiting, 5, what="the request to be handled")
    svc.complete_all()
    assert pending()["text"] == "after"


def test_a_deferred_reply_never_completed_times_out_and_its_handle_is_dropped(
    buses: tuple[Bus, Bus], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inbound, "DEFERRED_GRACE_S", 0.0)
    monkeypatch.setattr(inbound, "DEFERRED_SWEEP_S", 0.0)
    server, client = buses
    svc = DeferringService()
    server.serve("later", svc)
    with pytest.raises(RequestTimeout):  # the caller's deadline still applies
        client.transport.call("later", ECHO, {"text": "lost"}, timeout_s=0.3)
    poll_for(lambda: not server._deferred, 5, what="the server to drop the expired handle")
    assert server.deferred_dropped == 1
    assert svc.complete_all() == 1  # completing it late sends nothing and breaks nothing
    pending = client.transport.call_nowait("later", ECHO, {"text": "next"}, timeout_s=10)
    poll_for(lambda: svc.waiting, 5, what="the next request to be handled")
    svc.complete_all()
    assert pending()["text"] == "next"


def test_a_later_completed_before_the_handler_returns_is_answered_at_once(buses: tuple[Bus, Bus]) -> None:
    server, client = buses

    class Ready:
        inline_types = frozenset({ECHO})

        def handle(self, request: Request) -> Later:
            return Later.resolved({"text": "ready"})

    server.serve("ready", Ready())
    assert client.transport.call("ready", ECHO, {"text": "x"}, timeout_s=5)["text"] == "ready"


def test_a_later_completes_once_and_has_one_consumer() -> None:
    later = Later()
    with pytest.raises(RequestTimeout):
        later.result(0.01)
    seen: list[tuple[bool, Any]] = []
    doubled = later.map(lambda v: v * 2)
    doubled.then(lambda ok, v: seen.append((ok, v)))
    with pytest.raises(RuntimeError, match="one consumer"):
        doubled.then(lambda ok, v: None)
    later.resolve(21)
    later.fail(Conflict("too late"))  # ignored: the first completion wins
    assert later.result(0) == 21 and seen == [(True, 42)]
    failed = Later()
    mapped = failed.map(lambda v: v)
    failed.fail(Conflict("refused"))
    with pytest.raises(Conflict):
        mapped.result(0)
    after: list[bool] = []
    mapped.then(lambda ok, v: after.append(ok))  # already completed: called at once
    assert after == [False]
