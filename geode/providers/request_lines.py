"""The HTTP client's one INFO line per model request, kept out of a loop worker's log unless it logs DEBUG.

The SDKs' HTTP client (``httpx``; the ``httpx2`` re-export in some installs) logs ``HTTP Request: POST
<url> "HTTP/1.1 200 OK"`` at INFO for every request: one formatted and written log line per model call, on
the round's hot path, that says nothing the loop's own lines and the timeline do not. A worker whose
``[log] level`` is DEBUG still gets them.
"""

from __future__ import annotations

import logging

HTTP_LOGGERS = ("httpx", "httpx2")


def quiet_request_lines() -> None:
    """Raise the HTTP client loggers to WARNING unless the process logs DEBUG (call after logging set-up)."""
    if logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
        return
    for name in HTTP_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET or logger.level < logging.WARNING:
            logger.setLevel(logging.WARNING)
