"""One platform's poller on its own thread and asyncio loop, restarted in-process with jittered backoff
when it fails (a platform that keeps failing shows ``failed`` with its last error, never a crash loop)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from geode.messengers.poller import Poller
from geode.messengers.schedule import Backoff
from geode.protocol.errors import RequestTimeout, Unavailable

log = logging.getLogger(__name__)
T = TypeVar("T")
IO_THREADS = 32


class PollerRunner:
    """Owns the thread and loop of one :class:`Poller`. ``submit`` runs a coroutine on that loop from any
    thread; ``stop`` cancels the poller and joins the thread."""

    def __init__(
        self,
        poller: Poller,
        *,
        restart: Backoff | None = None,
        stable_s: float = 30.0,
        sidecar: Callable[[], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        self.poller = poller
        self.sidecar = sidecar  # runs beside the poller on its loop (the observation pass), until stop
        self.restart = restart or Backoff(1.0, 60.0)
        self.stable_s = stable_s
        self.loop = asyncio.new_event_loop()
        self._main: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=self._run, name=f"poller-{poller.platform}", daemon=True)
        self._started = threading.Event()

    def start(self) -> PollerRunner:
        self._thread.start()
        self._started.wait(5.0)
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        side: asyncio.Task[None] | None = None
        # blocking bus calls run here (asyncio.to_thread); replies may wait a minute each, so the pool is
        # wider than asyncio's default (cores + 4) and the outbox caps how many of them deliver at once
        self.loop.set_default_executor(
            concurrent.futures.ThreadPoolExecutor(
                IO_THREADS, thread_name_prefix=f"poller-{self.poller.platform}-io"
            )
        )
        try:
            self._main = self.loop.create_task(self._supervise())
            side = self.loop.create_task(self.sidecar()) if self.sidecar is not None else None
            self._started.set()
            self.loop.run_until_complete(self._main)
        except asyncio.CancelledError:
            pass
        finally:
            try:
                if side is not None:
                    side.cancel()
                    self.loop.run_until_complete(asyncio.gather(side, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                self.loop.run_until_complete(self.loop.shutdown_default_executor())
            finally:
                self.loop.close()

    async def _supervise(self) -> None:
        status = self.poller.status
        while True:
            began = self.loop.time()
            try:
                await self.poller.run()
            except asyncio.CancelledError:
                status.state = "stopped"
                raise
            except Exception as exc:
                if self.loop.time() - began > self.stable_s:
                    self.restart.reset()
                delay = self.restart.next()
                status.restarts += 1
                status.error("failed", f"{type(exc).__name__}: {exc}")
                log.error(
                    "%s poller failed (restart in %.1f s): %s", self.poller.platform, delay, exc, exc_info=exc
                )
                await asyncio.sleep(delay)

    def submit(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """Run ``coro`` on the poller's loop and wait for it (``RequestTimeout`` after ``timeout_s``)."""
        if self.loop.is_closed() or not self._thread.is_alive():
            coro.close()
            raise Unavailable(f"the {self.poller.platform} poller is stopped")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout_s)
        except concurrent.futures.TimeoutError as exc:
            raise RequestTimeout(
                f"the {self.poller.platform} poller did not finish in {timeout_s:g} s"
            ) from exc

    def stop(self, timeout_s: float = 5.0) -> None:
        main = self._main
        if main is not None and not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(main.cancel)
            except RuntimeError:
                pass
        self._thread.join(timeout_s)
