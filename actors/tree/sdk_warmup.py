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

Then one streamed Messages request is rehearsed through the adapter a loop worker builds (``build_provider``
on a placeholder config: the adapter, its encoded body, the SDK's request, httpx2 and geode's HTTP/1.1
transport, the SSE decoding and the stream's fold), answered in memory over a socket pair: no network, no
thread. The first request's lazy state (caches, schemas, the connection machinery's first use) is
then the zygote's too: a loop worker's first turn copied ~8.5 MiB of the zygote's pages in a fork, ~7.1 with
the rehearsal (``rehearse_request``).
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from typing import Any

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


# the answer of the rehearsed request: a streamed Messages response as the API sends it (HTTP/1.1, SSE)
_EVENTS: tuple[dict[str, Any], ...] = (
    {
        "type": "message_start",
        "message": {
            "id": "msg_warm",
            "type": "message",
            "role": "assistant",
            "model": "warm-up",
            "content": [],
            "usage": {"input_tokens": 1, "output_tokens": 0},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "pong"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
    {"type": "message_stop"},
)


def _response() -> bytes:
    sse = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in _EVENTS)
    return b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" + sse


def rehearse_request(modules: list[str] | tuple[str, ...]) -> bool:
    """One streamed request through an anthropic adapter built as a loop worker builds it, answered in
    memory; dropped after. False (printed) when skipped or failed: the workers then pay it at their first
    turn, as before. Must leave the process with one thread (the zygote forks after it)."""
    if "anthropic" not in modules or "anthropic" not in sys.modules:
        return False
    t0 = time.monotonic()
    try:
        from geode.config_schema import GeodeConfig
        from geode.conversation import Message
        from geode.providers.catalogue import DEFAULT_MODEL, model_info
        from geode.providers.selection import build_provider
        from geode.providers.types import ModelRequest

        model = DEFAULT_MODEL if model_info(DEFAULT_MODEL).provider == "anthropic" else "claude-sonnet-5"
        vendor = {"base_url": PLACEHOLDER["base_url"]}
        once = {"max_attempts": 1}  # a failure is skipped at once, never slept on
        config = GeodeConfig.model_validate(
            {"providers": {"model": model, "anthropic": vendor, "retry": once}}
        )
        env = {"ANTHROPIC_API_KEY": str(PLACEHOLDER["api_key"])}
        provider: Any = build_provider(model, env=env, config=config, dotenv={})
        client = provider.client
        peers: list[socket.socket] = []

        def canned(*_: object) -> socket.socket:  # a socket pair's end the answer is already written to
            mine, peer = socket.socketpair()
            peers.append(peer)
            peer.sendall(_response())
            peer.shutdown(socket.SHUT_WR)  # (kept open until the end: the request is written into it)
            return mine

        try:  # the transport's connection (geode/providers/http11_transport.py): the canned answer
            client._client._transport.opener = canned
            answer = provider.complete(ModelRequest(model=model, messages=(Message.user_text("ping"),)))
        finally:
            client.close()
            for peer in peers:
                peer.close()
        if answer.text != "pong":
            raise RuntimeError(f"unexpected answer {answer.text!r}")
    except Exception as exc:
        print(f"zygote: cannot rehearse a request: {exc!r}", file=sys.stderr, flush=True)
        return False
    if threading.active_count() != 1:  # never expected: forking now would copy a thread's state
        print(f"zygote: the rehearsal left {threading.active_count()} threads", file=sys.stderr, flush=True)
    print(f"zygote: rehearsed a request in {time.monotonic() - t0:.2f}s", flush=True)
    return True
