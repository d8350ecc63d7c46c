"""Turn any SDK/HTTP failure into a classified :class:`ProviderError` (kind, hint, status, retry hints).

Works by duck typing on the stainless SDK exception shapes (``status_code``, ``response``, ``body``) so
it never imports anthropic or openai itself.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

from geode.providers.types import ProviderError, ProviderErrorKind

HINTS = {
    ProviderErrorKind.RATE_LIMIT: "rate limited by the provider; wait, or lower concurrency",
    ProviderErrorKind.OVERLOADED: "the provider is overloaded or failing; try again shortly",
    ProviderErrorKind.TIMEOUT: "the provider did not answer in time; check the network or raise the timeout",
    ProviderErrorKind.CONNECTION: "could not reach the provider; check the base URL and the network",
    ProviderErrorKind.AUTH: "the API key/token was rejected; check the key (geode doctor) or log in again",
    ProviderErrorKind.BAD_REQUEST: "the provider rejected the request; check the model id and tool schemas",
    ProviderErrorKind.CONTEXT_OVERFLOW: "the conversation exceeds the model's context window; compact it",
    ProviderErrorKind.BILLING: "quota or credit exhausted; check the account's plan and billing",
    ProviderErrorKind.STREAM_INTERRUPTED: "the stream broke after output was shown; not auto-retried",
    ProviderErrorKind.UNKNOWN: "unexpected provider failure",
}

CONTEXT_MARKERS = (
    "context_length_exceeded",
    "prompt is too long",
    "maximum context length",
    "context window",
    "too many tokens",
    "request_too_large",
)
BILLING_MARKERS = (
    "insufficient_quota",
    "billing",
    "credit balance",
    "quota exceeded",
    "current quota",
    "payment required",
)

BODY_TYPES = {
    "rate_limit_error": ProviderErrorKind.RATE_LIMIT,
    "rate_limit_exceeded": ProviderErrorKind.RATE_LIMIT,
    "overloaded_error": ProviderErrorKind.OVERLOADED,
    "api_error": ProviderErrorKind.OVERLOADED,
    "server_error": ProviderErrorKind.OVERLOADED,
    "authentication_error": ProviderErrorKind.AUTH,
    "permission_error": ProviderErrorKind.AUTH,
    "billing_error": ProviderErrorKind.BILLING,
    "insufficient_quota": ProviderErrorKind.BILLING,
    "invalid_request_error": ProviderErrorKind.BAD_REQUEST,
    "not_found_error": ProviderErrorKind.BAD_REQUEST,
    "request_too_large": ProviderErrorKind.CONTEXT_OVERFLOW,
    "context_length_exceeded": ProviderErrorKind.CONTEXT_OVERFLOW,
}


def kind_for_status(status: int) -> ProviderErrorKind:
    if status == 429:
        return ProviderErrorKind.RATE_LIMIT
    if status in (401, 403):
        return ProviderErrorKind.AUTH
    if status == 402:
        return ProviderErrorKind.BILLING
    if status == 408:
        return ProviderErrorKind.TIMEOUT
    if status == 413:
        return ProviderErrorKind.CONTEXT_OVERFLOW
    if status >= 500:
        return ProviderErrorKind.OVERLOADED
    if 400 <= status < 500:
        return ProviderErrorKind.BAD_REQUEST
    return ProviderErrorKind.UNKNOWN


def parse_retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date); None when absent."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def parse_should_retry(headers: Any) -> bool | None:
    raw = headers.get("x-should-retry") if headers is not None else None
    if raw is None:
        return None
    return raw.strip().lower() == "true"


def _body_error(body: Any) -> tuple[str, str]:
    """(error type or code, message) out of an Anthropic or OpenAI error body."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            etype = str(err.get("code") or err.get("type") or "")
            return etype, str(err.get("message") or "")
    return "", str(body or "")


def _refine(kind: ProviderErrorKind, etype: str, text: str) -> ProviderErrorKind:
    low = f"{etype} {text}".lower()
    if kind in (
        ProviderErrorKind.BAD_REQUEST,
        ProviderErrorKind.CONTEXT_OVERFLOW,
        ProviderErrorKind.UNKNOWN,
    ) and any(m in low for m in CONTEXT_MARKERS):
        return ProviderErrorKind.CONTEXT_OVERFLOW
    if kind in (
        ProviderErrorKind.RATE_LIMIT,
        ProviderErrorKind.BAD_REQUEST,
        ProviderErrorKind.UNKNOWN,
    ) and any(m in low for m in BILLING_MARKERS):
        return ProviderErrorKind.BILLING
    return kind


def classify(exc: BaseException) -> ProviderError:
    """Classify an exception raised while calling a provider."""
    if isinstance(exc, ProviderError):
        return exc
    name = type(exc).__name__
    names = {c.__name__ for c in type(exc).__mro__}
    status = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) if response is not None else None
    message = str(getattr(exc, "message", None) or exc) or name
    if isinstance(status, int) and status >= 400 and status != 200:
        etype, text = _body_error(getattr(exc, "body", None))
        kind = _refine(kind_for_status(status), etype, text or message)
        return ProviderError(
            kind,
            f"{status} {text or message}",
            hint=HINTS[kind],
            status=status,
            retry_after_s=parse_retry_after(headers),
            should_retry=parse_should_retry(headers),
        )
    if "APITimeoutError" in names or "TimeoutException" in names or isinstance(exc, TimeoutError):
        return ProviderError(ProviderErrorKind.TIMEOUT, message, hint=HINTS[ProviderErrorKind.TIMEOUT])
    if names & {"APIConnectionError", "TransportError", "NetworkError", "RemoteProtocolError"} or isinstance(
        exc, ConnectionError | OSError
    ):
        return ProviderError(ProviderErrorKind.CONNECTION, message, hint=HINTS[ProviderErrorKind.CONNECTION])
    if "APIError" in names:  # an error event inside a stream (no HTTP status): classify by its body
        etype, text = _body_error(getattr(exc, "body", None))
        kind = _refine(BODY_TYPES.get(etype, ProviderErrorKind.OVERLOADED), etype, text or message)
        return ProviderError(kind, text or message, hint=HINTS[kind])
    return ProviderError(
        ProviderErrorKind.UNKNOWN, f"{name}: {message}", hint=HINTS[ProviderErrorKind.UNKNOWN]
    )


def stream_error(body: dict[str, Any]) -> ProviderError:
    """A provider error event seen inside an SSE stream (e.g. Anthropic ``error`` / Responses ``error``)."""
    etype, text = _body_error(body)
    kind = _refine(BODY_TYPES.get(etype, ProviderErrorKind.OVERLOADED), etype, text)
    return ProviderError(kind, text or etype or "stream error", hint=HINTS[kind])
