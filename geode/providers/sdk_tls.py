"""One TLS context per process for the anthropic SDK's HTTP clients, built once by the zygote and shared.

Left to itself, every ``anthropic.Anthropic`` client builds its own ``ssl.SSLContext`` (``httpx2`` with
``verify=True``) and loads the system's CA bundle into it: ~3 MiB of OpenSSL memory per client, and the first
one in a process also fills OpenSSL's lazy state. A loop worker builds its client after the fork, so each one
held its own copy. :func:`shared_context` builds the context exactly as the SDK's default transport does
(``httpx2.create_ssl_context(verify=True, trust_env=True)``: the same CA file, the same ``SSL_CERT_FILE`` /
``SSL_CERT_DIR`` overrides) once per process, the zygote builds it before it forks the loop workers
(``actors/tree/sdk_warmup.py``), and :func:`http_client` gives the SDK its own default HTTP client (its
connection limits, redirects, keep-alive socket options, proxies from the environment, closed when dropped)
verifying with it, its default (unproxied) transport our own HTTP/1.1 one
(``geode/providers/http11_transport.py``). A context is only read by the connections made with it, so
clients and threads share it; a changed ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` / ``SSLKEYLOGFILE`` builds a
new one.
"""

from __future__ import annotations

import os
import ssl
import threading
from typing import Any

_ENV = ("SSL_CERT_FILE", "SSL_CERT_DIR", "SSLKEYLOGFILE")  # what the default context is built from
_lock = threading.Lock()
_built: tuple[tuple[str | None, ...], ssl.SSLContext] | None = None
built_count = 0  # contexts this process built (a count for tests and the zygote's log)


def shared_context() -> ssl.SSLContext:
    """The process's default TLS context for the SDK (built at the first call, or when the environment
    variables it depends on changed since)."""
    global _built, built_count
    key = tuple(os.environ.get(name) for name in _ENV)
    with _lock:
        if _built is None or _built[0] != key:
            import httpx2

            _built = (key, httpx2.create_ssl_context(verify=True, trust_env=True))
            built_count += 1
        return _built[1]


def http_client(sdk: Any, base_url: str | None, timeout: Any) -> Any:
    """The HTTP client ``sdk`` (the ``anthropic`` module) builds by default for a client with ``base_url``
    and ``timeout``, verifying with :func:`shared_context` instead of a context of its own."""
    from importlib import import_module

    from geode.providers import http11_transport

    wrapper = import_module(f"{sdk.__name__}._base_client").SyncHttpxClientWrapper
    context = shared_context()
    client = wrapper(base_url=base_url or "", timeout=timeout, verify=context)
    http11_transport.install(client, context)  # our HTTP/1.1 transport for the URLs no proxy takes
    return client
