"""The platform-neutral errors a messenger translator raises: the poller decides from these alone whether to
retry, wait ``retry_after_s``, report a conflict, or give up on a request."""

from __future__ import annotations


class PlatformError(Exception):
    """A messenger platform call failed. ``retryable``: the same call may succeed later (network, 5xx)."""

    retryable: bool = True

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable


class RateLimited(PlatformError):
    """HTTP 429: the platform asks to wait ``retry_after_s`` seconds before the next call."""

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message, retryable=True)
        self.retry_after_s = float(retry_after_s)


class Conflict(PlatformError):
    """HTTP 409: another poller uses the same token, or a webhook is active. Retry with backoff."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)


class Rejected(PlatformError):
    """The platform refused the request itself (HTTP 400/403: a chat that does not exist, a bad
    parameter, a bot removed from the chat). Sending it again cannot succeed."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class NotPosted(PlatformError):
    """The platform answered that it did not take the request (HTTP 5xx), or no connection was made: nothing
    was posted, and the same post may be tried again later (unlike a timeout after sending, which may have
    posted)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)
