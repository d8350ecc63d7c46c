"""The Prometheus page of ``geode serve``: ``GET /metrics`` served by the supervisor process from the tree's
multiprocess directory (``$GEODE_HOME/run/metrics``), with an optional bearer token.

Why the supervisor: it is the one process that outlives every child (a page in a child would vanish with it
and need its own restarts), it sets ``PROMETHEUS_MULTIPROC_DIR`` before the zygote and the children start
(prometheus_client reads it at import), it sees each child exit (``mark_process_dead``) and it counts the
restarts itself. The page sums every pid's files at each scrape; the supervisor's own work is one thread.
The directory is emptied at each start (a counter begins at 0 with the tree) and kept while it runs, so a
child's counters survive its death. Off (``[metrics] listen = ""``) nothing here runs and prometheus_client is
never imported."""

from __future__ import annotations

import errno
import hmac
import logging
import os
import shutil
import threading
from pathlib import Path
from typing import Any

from geode.home import GeodeHome
from geode.metrics.record import ENV
from geode.metrics.settings import MetricsSection, parse_listen
from geode.private_dir import ensure_private_dir
from geode.protocol.errors import ConfigError

log = logging.getLogger(__name__)
PATH = "/metrics"


def metrics_dir(home: GeodeHome) -> Path:
    return home.run_dir / "metrics"


def metrics_off() -> None:
    """Metrics off: no child inherits a multiprocess directory from the operator's shell."""
    for var in (ENV, "PROMETHEUS_MULTIPROC_DIR"):
        os.environ.pop(var, None)


class MetricsPage:
    """The bound listening socket and its serving thread (started by :meth:`start`)."""

    def __init__(self, home: GeodeHome, section: MetricsSection) -> None:
        host, port = parse_listen(section.listen)
        self.token = b""
        if section.token_env:
            value = home.load_dotenv().get(section.token_env, "")
            if not value:
                raise ConfigError(
                    f"[metrics] token_env = {section.token_env!r}: no such key in {home.env_file}"
                )
            self.token = value.encode()
        from http.server import ThreadingHTTPServer  # only with [metrics] listen: not in every supervisor

        try:
            self.server = ThreadingHTTPServer((host, port), _handler(self))
        except OSError as exc:
            metrics_off()
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(
                    f"[metrics] listen = {section.listen!r}: the port is in use; choose another"
                ) from None
            raise ConfigError(f"[metrics] listen = {section.listen!r}: {exc.strerror or exc}") from None
        self.server.daemon_threads = True
        directory = metrics_dir(home)
        shutil.rmtree(directory, ignore_errors=True)  # a new tree counts from 0
        ensure_private_dir(directory)
        os.environ[ENV] = os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)  # before any import of it
        self.env = {ENV: str(directory), "PROMETHEUS_MULTIPROC_DIR": str(directory)}
        self.address = f"{host}:{self.server.server_address[1]}"
        self._thread: threading.Thread | None = None

    def start(self) -> MetricsPage:
        self._thread = threading.Thread(target=self.server.serve_forever, name="metrics-page", daemon=True)
        self._thread.start()
        log.info("metrics page on http://%s%s%s", self.address, PATH, " (bearer token)" if self.token else "")
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self.server.shutdown()
        self.server.server_close()

    def render(self) -> bytes:
        from prometheus_client import CollectorRegistry, generate_latest, multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry)

    def allowed(self, authorization: str) -> bool:
        if not self.token:
            return True
        scheme, _, given = authorization.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.token)


def _handler(page: MetricsPage) -> Any:
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        server_version = "geode-metrics"

        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != PATH:
                self._send(404, b"not found: GET /metrics\n")
            elif not page.allowed(self.headers.get("Authorization", "")):
                self._send(401, b"unauthorized: send Authorization: Bearer <token>\n", auth=True)
            else:
                try:
                    body = page.render()
                except Exception as exc:  # a torn file of a dying child: this scrape fails, the next works
                    log.warning("metrics page: %s", exc)
                    self._send(500, b"metrics unavailable, try again\n")
                    return
                self._send(200, body, ctype="text/plain; version=0.0.4; charset=utf-8")

        def _send(self, code: int, body: bytes, *, ctype: str = "text/plain", auth: bool = False) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            if auth:
                self.send_header("WWW-Authenticate", "Bearer")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # no access log per scrape

    return Handler
