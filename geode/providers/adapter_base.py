"""What every wire adapter shares: the endpoint settings, a lazily built SDK client, and the retried call.

Adapters build the wire body themselves and send it through the SDK's low-level ``client.post`` (SDK auth,
headers and error classes kept; the typed request transform skipped), or, for the Anthropic adapter, through
the SDK's request built once per client (:mod:`geode.providers.sdk_send`). SDK retries are off
(``max_retries=0``): :class:`~geode.providers.retry.Retrier` is the only retry policy.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from geode.providers.classify import HINTS, classify
from geode.providers.events import EventCallback
from geode.providers.pricing import Price, priced
from geode.providers.retry import CallbackAborted, Retrier
from geode.providers.sse_events import json_value
from geode.providers.types import DeltaCallback, ModelRequest, ModelResponse, ProviderError, ProviderErrorKind


@dataclass
class Endpoint:
    """One vendor endpoint: who, where, which key. ``options`` are wire tweaks (see docs/providers.md)."""

    provider: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 300.0
    connect_timeout_s: float = 5.0
    default_headers: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)


def http_timeout(ep: Endpoint, sdk: Any) -> Any:
    """The SDK's own ``Timeout`` (its httpx2 re-export): connect 5 s, read ``timeout_s``."""
    return sdk.Timeout(
        ep.timeout_s,
        connect=ep.connect_timeout_s,
        write=min(30.0, ep.timeout_s),
        pool=min(10.0, ep.timeout_s),
    )


class StreamSink:
    """Forwards deltas in order and remembers whether any reached the caller (then a failure is terminal)."""

    def __init__(self, on_delta: DeltaCallback | None) -> None:
        self._on_delta = on_delta
        self.emitted = False

    def __call__(self, text: str) -> None:
        if not text:
            return
        self.emitted = True
        if self._on_delta is not None:
            try:
                self._on_delta(text)
            except Exception as exc:  # the caller's own exception (e.g. a cancel): never a provider failure
                raise CallbackAborted(exc) from exc


class WireAdapter:
    """Base class; subclasses set ``adapter`` and implement ``_make_client``, ``build_body`` and ``_send``."""

    adapter = "base"

    def __init__(
        self, endpoint: Endpoint, *, retrier: Retrier | None = None, on_event: EventCallback | None = None
    ) -> None:
        self.endpoint = endpoint
        self.name = endpoint.provider
        self.model = ""  # the resolved default model id when built from settings (callers may read it)
        self.prices: dict[str, Price] = {}  # optional per-model prices -> usage.cost_usd
        self.retrier = retrier or Retrier()
        if on_event is not None:
            self.retrier.on_event = on_event
        self._client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(provider={self.name!r}, base_url={self.endpoint.base_url!r})"

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._make_client()
            return self._client

    def set_api_key(self, api_key: str) -> None:
        """Swap the credential (e.g. after an OAuth refresh); the SDK client is rebuilt on next use."""
        with self._lock:
            self.endpoint.api_key = api_key
            self._client = None

    def _make_client(self) -> Any:
        raise NotImplementedError

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        """The body :meth:`complete` sends: ``build_body``'s, where an adapter may put lists of items already
        encoded (:class:`Encoded`, each message's JSON cached per message) so a round does not re-encode
        the whole history. Encodes to the same JSON object as ``build_body``."""
        return self.build_body(request)

    def _send(self, body: dict[str, Any], request: ModelRequest, sink: StreamSink) -> ModelResponse:
        raise NotImplementedError

    def complete(
        self,
        request: ModelRequest,
        on_delta: DeltaCallback | None = None,
        *,
        on_event: EventCallback | None = None,
    ) -> ModelResponse:
        body = self.wire_body(request)

        def attempt(_n: int) -> ModelResponse:
            sink = StreamSink(on_delta)
            try:
                return self._send(body, request, sink)
            except CallbackAborted:
                raise
            except Exception as exc:
                if not sink.emitted:
                    raise
                err = classify(exc)
                raise ProviderError(
                    ProviderErrorKind.STREAM_INTERRUPTED,
                    f"stream interrupted after output ({err.kind.value}: {err.message})",
                    hint=HINTS[ProviderErrorKind.STREAM_INTERRUPTED],
                    status=err.status,
                ) from exc

        response, attempts = self.retrier.run(
            attempt, provider=self.name, model=request.model, on_event=on_event
        )
        if response.attempts != attempts or response.provider != self.name:  # (a copy only when they differ)
            response = response.model_copy(update={"attempts": attempts, "provider": self.name})
        return priced(response, request.model, self.prices)


JSON_HEADERS = {"Content-Type": "application/json"}


class Encoded(list[bytes]):
    """A JSON array given as its items already encoded (UTF-8 JSON), spliced in by :func:`encode_body`."""


class Joined(list[bytes]):
    """A JSON array given as its content already encoded and joined (items separated by ``", "``, no
    brackets), in consecutive pieces: a conversation's messages as a round reuses them
    (:meth:`~geode.providers.encoded_history.EncodedHistory.joined`)."""


# A piece at least BIG bytes long is sent as it is, shorter ones are joined with their neighbours: an extra
# write costs the sender ~15-20 µs of CPU here (loopback, load 12), a copy of 1 MB ~100 µs.
BIG = 64 * 1024


# ``json.dumps(value, ensure_ascii=False)``'s encoder, made once (json.dumps makes one per call when it is
# given an argument): the same text
_JSON = json.JSONEncoder(ensure_ascii=False)
_KEY_HEADS: dict[str, bytes] = {}  # a spliced key ("messages", "tools", "system") -> its encoded '"key": ['


def _key_head(key: str) -> bytes:
    head = _KEY_HEADS.get(key)
    if head is None:
        head = _JSON.encode(key).encode() + b": ["
        if len(_KEY_HEADS) < 64:
            _KEY_HEADS[key] = head
    return head


def body_chunks(body: dict[str, Any]) -> list[bytes]:
    """``body`` as UTF-8 JSON in consecutive chunks: its top-level :class:`Encoded` and :class:`Joined` values
    spliced from their encoded pieces, the pieces of :data:`BIG` bytes or more kept as they are (not
    copied), the short ones joined with what comes between them. A body without them is one chunk."""
    spliced = [(k, v) for k, v in body.items() if isinstance(v, (Encoded, Joined))]
    if not spliced:
        return [_JSON.encode(body).encode()]
    rest = {k: v for k, v in body.items() if not isinstance(v, (Encoded, Joined))}
    out: list[bytes] = []
    short = [_JSON.encode(rest).encode()[:-1]] if rest else [b"{"]
    for n, (k, v) in enumerate(spliced):
        short.append(b", " if rest or n else b"")
        short.append(_key_head(k))
        for i, piece in enumerate(v):
            if i and isinstance(v, Encoded):
                short.append(b", ")
            if len(piece) < BIG:
                short.append(piece)
                continue
            if any(short):
                out.append(b"".join(short))
            out.append(piece)
            short = []
        short.append(b"]")
    short.append(b"}")
    out.append(b"".join(short))
    return out


def encode_body(body: dict[str, Any]) -> bytes:
    """``body`` as UTF-8 JSON in one buffer (:func:`body_chunks` joined: one copy of the history)."""
    chunks = body_chunks(body)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def post_json(client: Any, path: str, body: dict[str, Any], *, stream_cls: Any = None) -> Any:
    """POST an already-built body through the SDK client as pre-serialized JSON bytes.

    Sending ``content=`` (not ``body=``) skips the SDK's per-request deep copy of the body while keeping its
    auth, headers, timeouts and error classes. Returns a dict, or an SDK Stream of dicts when ``stream_cls``.
    """
    data = encode_body(body)
    options = {"headers": JSON_HEADERS}
    if stream_cls is None:
        return client.post(path, content=data, options=options, cast_to=object)
    return client.post(
        path, content=data, options=options, cast_to=object, stream=True, stream_cls=stream_cls
    )


def json_args(raw: str) -> dict[str, Any]:
    """Tool-call arguments from a JSON string; a non-object or broken string is kept under ``_raw``."""
    if not raw:
        return {}
    try:
        value = json_value(raw)
    except json.JSONDecodeError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}
