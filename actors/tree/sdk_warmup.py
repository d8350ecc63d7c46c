"""What the zygote builds once after importing the provider SDKs, so that every loop worker forked after
shares it.

Importing ``anthropic`` or ``openai`` is not all a worker pays: the first client it builds (at its warm-up,
``geode.loop.turn_providers``) fills the SDKs' and httpx's lazy state (cached platform headers, pydantic
schemas built on first use, ``functools`` caches) and writes into objects the zygote's imports made, which
copies those pages into the worker: ~12 MiB of private memory per loop worker, measured in a fork. Built once
in the zygote and dropped (a throw-away key and a local address: nothing is sent, no socket is opened, no
thread is started, so forking stays safe), that state is the zygote's and shared; a worker's own client then
costs ~3 MiB (docs/benchmarks.md, "Start, restart and memory"). The anthropic client's TLS context (the CA
bundle loaded into OpenSSL, ~1.3 MiB more per worker) is built here too and kept: the workers' clients verify
with it (``geode/providers/sdk_tls.py``).
"""

from __future__ import annotations

import contextlib
import sys
import time

# a client per SDK, built with what geode.providers passes (explicit key and base URL: no env, no network)
PLACEHOLDER = {"api_key": "geode-zygote-warm-up", "base_url": "http://127.0.0.1:9", "max_retries": 0}


def _tls_client(sdk: object, timeout: object) -> object:
    """The HTTP client the anthropic adapter gives its SDK client, with the process's one TLS context
    (``geode/providers/sdk_tls.py``), which stays: every loop worker forked after shares it (~3 MiB each)."""
    from geode.providers import sdk_tls

    return sdk_tls.http_client(sdk, str(PLACEHOLDER["base_url"]), timeout)


def build_and_drop(modules: list[str] | tuple[str, ...]) -> list[str]:
    """Build and close one client of each provider SDK among ``modules`` that is imported; the names built.
    A failure is printed and skipped: the worker builds its own client as before."""
    built = []
    for name, cls in (("anthropic", "Anthropic"), ("openai", "OpenAI")):
        sdk = sys.modules.get(name)
        if name not in modules or sdk is None:
            continue
        t0 = time.monotonic()
        try:
            timeout = sdk.Timeout(60.0, connect=5.0)
            extra = {"http_client": _tls_client(sdk, timeout)} if name == "anthropic" else {}
            client = getattr(sdk, cls)(**PLACEHOLDER, timeout=timeout, **extra)
        except Exception as exc:
            print(f"zygote: cannot build the {name} client: {exc!r}", file=sys.stderr, flush=True)
            continue
        with contextlib.suppress(Exception):
            client.close()
        built.append(name)
        print(f"zygote: built the {name} client in {time.monotonic() - t0:.2f}s", flush=True)
    return built
