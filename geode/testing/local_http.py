"""The lifecycle the local messenger servers share: an aiohttp app served on its own thread and event loop,
started and stopped from any other thread (``with Server() as s:``)."""

from __future__ import annotations

import asyncio
import threading
from typing import ClassVar, Self

from aiohttp import web


class LocalHttpServer:
    """Subclasses give ``_app()`` (called on the server's thread, once ``self._loop`` is its loop), a
    ``server_name`` for errors, a ``thread_name``, and optionally ``_before_stop()`` (run on the loop by
    ``stop()`` before it stops: close long-lived sockets and polls so the shutdown is not held up)."""

    server_name: ClassVar[str] = "HTTP"
    thread_name: ClassVar[str] = "local-http"
    shutdown_timeout_s: ClassVar[float] = 2.0  # aiohttp's grace for open requests at cleanup
    await_cancelled: ClassVar[bool] = False  # at the end, wait for the cancelled leftover tasks to finish
    wait_s: ClassVar[float] = 15.0  # start() waits this long for the port; stop() for the thread

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failed: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> Self:
        """Serve on a new thread and loop; returns once listening (``self.port`` is then the bound port)."""
        self._failed = None
        self._ready.clear()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()
        if not self._ready.wait(self.wait_s) or self._failed is not None:
            raise RuntimeError(f"local {self.server_name} server did not start: {self._failed!r}")
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            stopping = asyncio.run_coroutine_threadsafe(self._stop_serving(), loop)
            thread.join(self.wait_s)
            self._thread = None
            if stopping.done():
                stopping.result()  # raises what _before_stop() raised
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _app(self) -> web.Application:
        raise NotImplementedError

    async def _before_stop(self) -> None:
        return None

    async def _stop_serving(self) -> None:
        try:
            await self._before_stop()
        finally:
            asyncio.get_running_loop().stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        runner = web.AppRunner(self._app(), access_log=None, shutdown_timeout=self.shutdown_timeout_s)
        try:
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, self.host, self.port)
            loop.run_until_complete(site.start())
            self.port = int(runner.addresses[0][1])
        except BaseException as exc:  # reported by start()
            self._failed = exc
        self._ready.set()
        try:
            if self._failed is None:
                loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            rest = asyncio.all_tasks(loop)
            for task in rest:
                task.cancel()
            if self.await_cancelled and rest:
                loop.run_until_complete(asyncio.gather(*rest, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
