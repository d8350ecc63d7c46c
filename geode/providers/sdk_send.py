"""One JSON POST through a stainless SDK client (anthropic) without its per-request option layers.

``client.post`` builds, for every request, a pydantic ``FinalRequestOptions``, copies it twice, merges the
headers, parses and joins the URL, builds the ``httpx`` request, then wraps the response in the SDK's
``Stream`` (issue 34: about a quarter of the loop's model request CPU). A :class:`DirectPost` asks the
client's own ``_build_request`` once per client and path for the URL, headers (auth, version, platform,
custom) and timeouts, and then per request only builds the ``httpx`` request with the new body and sends it
through the client's own ``httpx`` client (its pool, proxies, redirects, ``custom_auth``; to geode's
HTTP/1.1 transport without ``Client.send``'s per-request layers when nothing of them applies:
:meth:`DirectPost._sent`). The SDK stays
the transport and the error mapping: a transport failure becomes the SDK's ``APITimeoutError`` /
``APIConnectionError``, a non-2xx answer the SDK's status error (read from its body), a stream is read
with the SDK's SSE decoder and its ``error`` event raised as the SDK does. A client whose requests the SDK
would change per request (middleware, a subclass that signs or rewrites requests) is not
eligible: :meth:`Senders.get` returns None and the caller uses ``client.post``.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from geode.providers.sse_events import json_value, sse_events

_httpx_log = logging.getLogger("httpx2")  # the client's own logger (its "HTTP Request: ..." line)
_BASE_HOOKS = {
    "_prepare_request": "SyncAPIClient._prepare_request",
    "_prepare_options": "SyncAPIClient._prepare_options",
}


class DirectPost:
    """The SDK's request for ``path`` built once; :meth:`send` sends it with a new body."""

    def __init__(self, client: Any, path: str, headers: dict[str, str]) -> None:
        import anthropic
        from anthropic._models import FinalRequestOptions

        self._sdk = anthropic
        self.client = client
        options = FinalRequestOptions.construct(method="post", url=path, content=b"", headers=headers)
        template = client._build_request(options)
        self.url = template.url
        self.headers = template.headers.copy()
        self.headers.pop("content-length", None)  # the body's own, set per request
        self.headers.pop("cookie", None)  # the client's cookie jar as it is then: merged per request below
        self.extensions = dict(template.extensions)
        self._encoding = self.headers.encoding  # (httpx works it out again on each copy otherwise)
        auth = client.custom_auth
        self._send_kw: dict[str, Any] = {} if auth is None else {"auth": auth}
        self._direct = _httpx_internals_present(client._client)  # else every request goes by Client.send

    def send(self, content: bytes | list[bytes], *, stream: bool) -> Any:
        """The ``httpx`` response (2xx; streamed when ``stream``, else read); the SDK's errors otherwise.

        ``content`` may be the body's consecutive chunks (:func:`~geode.providers.adapter_base.body_chunks`):
        they are written to the connection one after the other under the body's ``Content-Length`` (never
        chunked transfer encoding, never joined into one buffer); a retry sends them all again."""
        sdk, client = self._sdk, self.client
        request = self._request(content)
        response = None
        try:
            response = self._sent(request)
            if not stream:
                _read(response)
        except sdk._exceptions.AnthropicError:
            raise
        except Exception as err:  # the SDK's own mapping (its _attempt_request)
            raise _transport_error(client, request, err, sdk) from err
        if not response.is_success:
            if not response.is_closed:
                _read(response)
            raise client._make_status_error_from_response(response) from None
        return response

    def _sent(self, request: Any) -> Any:
        """``client._client.send(request, stream=True)``: through ``Client.send`` itself when the client has
        auth, event hooks, no redirect following or another transport for the URL; else the transport's
        response is finished here as ``Client.send`` finishes it (the request attached to it and to a
        transport error, its elapsed time on close, cookies kept, the client's default encoding, the
        client's log line, a redirect followed by the client) without its auth, redirect and context
        layers around one request (~35 Python calls)."""
        http = self.client._client
        if not self._direct:
            return http.send(request, stream=True, **self._send_kw)
        direct = "timeout" in request.extensions and http.follow_redirects and http._auth is None
        if self._send_kw or not direct or http.is_closed:
            return http.send(request, stream=True, **self._send_kw)
        hooks = http._event_hooks
        transport = http._transport_for_url(request.url)
        if hooks["request"] or hooks["response"] or type(transport) is not _direct_class():
            return http.send(request, stream=True, **self._send_kw)
        return _finish(http, request, transport)

    def _request(self, content: bytes | list[bytes]) -> Any:
        """The ``httpx`` request: the template's URL, headers and extensions with this body, built as
        ``build_request`` builds it (the same headers in the same order, ``Content-Length`` last) without
        merging and normalizing again what the template already holds (~0.1-0.2 ms a request). A client
        whose cookie jar holds cookies goes through ``build_request`` (it merges them per request)."""
        import httpx2

        chunks = [content] if isinstance(content, bytes) else content
        http = self.client._client
        if http.cookies:
            body = chunks[0] if len(chunks) == 1 else chunks
            request = http.build_request(
                "POST", self.url, headers=self.headers, content=body, extensions=self.extensions
            )
            if isinstance(body, list):
                request.headers.pop("transfer-encoding", None)
                request.headers["content-length"] = str(sum(map(len, chunks)))
            return request
        headers = httpx2.Headers(self.headers, encoding=self._encoding)
        headers["Content-Length"] = str(sum(map(len, chunks)))
        stream = httpx2.ByteStream(chunks[0]) if len(chunks) == 1 else _chunks_class()(chunks)
        request = httpx2.Request("POST", self.url, stream=stream, extensions=self.extensions)
        request.headers = headers
        return request


@functools.cache
def _chunks_class() -> type:
    """An ``httpx`` byte stream of a body's consecutive chunks (each written as it is; replayable: a retry
    sends it again), its class made when first needed (``httpx2`` is imported lazily)."""
    import httpx2

    class Chunks(httpx2.SyncByteStream):
        replayable = True  # (geode.providers.http11_transport may send it again on a new connection)

        def __init__(self, chunks: list[bytes]) -> None:
            self._chunks = chunks

        def __iter__(self) -> Iterator[bytes]:
            return iter(self._chunks)

    return Chunks


_HTTPX_INTERNALS = (
    "_auth",
    "_event_hooks",
    "_transport_for_url",
    "_state",
    "_cookies",
    "_default_encoding",
    "_build_redirect_request",
    "_send_handling_redirects",
)


def _httpx_internals_present(http: Any) -> bool:
    """Whether ``http`` (an ``httpx2.Client``) has what :func:`_finish` uses of its internals: an ``httpx2``
    release that renamed one sends every request through ``Client.send`` instead of failing them."""
    try:
        from httpx2._client import BoundSyncStream, ClientState  # noqa: F401
    except ImportError:
        return False
    return all(hasattr(http, name) for name in _HTTPX_INTERNALS) and hasattr(ClientState, "OPENED")


@functools.cache
def _direct_class() -> type:
    from geode.providers.http11_transport import Http11Transport

    return Http11Transport


def _finish(http: Any, request: Any, transport: Any) -> Any:
    """``http``'s ``_send_single_request`` and redirect handling for one request (see DirectPost._sent)."""
    import httpx2
    from httpx2._client import BoundSyncStream, ClientState

    http._state = ClientState.OPENED
    start = time.perf_counter()
    try:
        response = transport.handle_request(request)
    except httpx2.RequestError as exc:
        exc.request = request
        raise
    response.request = request
    response.stream = BoundSyncStream(response.stream, start=start)
    try:
        http._cookies.extract_cookies(response)
        response.default_encoding = http._default_encoding
        if _httpx_log.isEnabledFor(logging.INFO):
            _httpx_log.info(
                'HTTP Request: %s %s "%s %d %s"',
                request.method,
                request.url,
                response.http_version,
                response.status_code,
                response.reason_phrase,
            )
        if not response.has_redirect_location:
            return response
        following = http._build_redirect_request(request, response)
        response.read()
    except BaseException:
        response.close()
        raise
    return http._send_handling_redirects(following, follow_redirects=True, history=[response])


def _read(response: Any) -> None:
    try:
        response.read()
    except BaseException:
        response.close()
        raise


def _transport_error(client: Any, request: Any, err: Exception, sdk: Any) -> Exception:
    import httpx2

    if isinstance(err, httpx2.TimeoutException):
        return client._make_timeout_error(request, err)  # type: ignore[no-any-return]
    return client._make_connection_error(request, err)  # type: ignore[no-any-return]


def eligible(client: Any) -> bool:
    """Whether every request of ``client`` is its one template with a new body (see the module doc)."""
    if getattr(client, "_middleware", ()):
        return False  # (OpenTelemetry: the SDK starts a span only for its own methods, never for a ``post``)
    cls = type(client)
    return all(getattr(getattr(cls, name, None), "__qualname__", "") == q for name, q in _BASE_HOOKS.items())


class Senders:
    """An adapter's senders: one per SDK client (a new client, e.g. after ``set_api_key``, builds anew)."""

    def __init__(self, path: str, headers: dict[str, str]) -> None:
        self._path, self._headers = path, headers
        self._built: tuple[Any, DirectPost | None] = (None, None)
        self._lock = threading.Lock()

    def get(self, client: Any) -> DirectPost | None:
        """The sender for ``client``, or None when ``client`` is not eligible (then use ``client.post``)."""
        with self._lock:
            built_for, sender = self._built
            if built_for is not client:
                sender = DirectPost(client, self._path, self._headers) if eligible(client) else None
                self._built = (client, sender)
            return sender


def json_of(response: Any) -> Any:
    """A read response's JSON as the SDK returns it for ``cast_to=object`` (its text when not JSON)."""
    content_type = response.headers.get("content-type", "*").split(";")[0]
    return response.json() if content_type.lower().endswith("json") else response.text


def sse_data(response: Any, client: Any) -> Iterator[Any]:
    """The JSON data of each named event of a streamed response, as the anthropic SDK's ``Stream`` yields
    it (``ping`` and unnamed events skipped, an ``error`` event raised as its status error); the response
    is closed at the end, on a failure, or when the caller stops early. The events are read by
    :func:`~geode.providers.sse_events.sse_events` (the SDK's decoder's reading, in one generator) from
    the response's raw stream (its decoded bytes when it has a content encoding), a failure to read them
    raised as the SDK's connection or timeout error."""
    try:
        for event, data in sse_events(_body_bytes(response, client)):
            if event == "ping":
                continue
            if event == "error":
                body: Any = data
                try:
                    body = json.loads(data)
                    err_msg = f"{body}"
                except Exception:
                    err_msg = data or f"Error code: {response.status_code}"
                raise client._make_status_error(err_msg, body=body, response=response)
            if data:
                yield json_value(data)
    finally:
        response.close()


def _body_bytes(response: Any, client: Any) -> Iterator[bytes]:
    """The response body's chunks: read from its stream itself when it is not encoded (what ``iter_raw``
    yields, without its generator and chunker around each chunk; the response is closed by the caller),
    from ``iter_bytes`` when it is; a read failure becomes the SDK's error as in its
    ``iter_response_bytes``."""
    import httpx2
    from anthropic import AnthropicError

    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity") and not (response.is_stream_consumed or response.is_closed):
        response.is_stream_consumed = True
        stream = response.stream  # httpx's BoundSyncStream (timing its close) around the transport's stream:
        inner = getattr(stream, "_stream", None) if type(stream).__name__ == "BoundSyncStream" else None
        chunks = iter(stream if inner is None else inner)  # (read from the inner one: a generator fewer)
    else:
        chunks = response.iter_bytes()
    while True:
        try:
            chunk = next(chunks, None)
        except AnthropicError:
            raise
        except httpx2.TimeoutException as err:
            raise client._make_timeout_error(response.request, err) from err
        except Exception as err:
            raise client._make_connection_error(response.request, err) from err
        if chunk is None:
            return
        yield chunk
