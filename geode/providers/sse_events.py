r"""A streamed response's server-sent events read in one generator, as the anthropic SDK's decoder reads them.

The SDK reads a stream through four generators (``iter_response_bytes`` over ``Response.iter_bytes``, then
``SSEDecoder._iter_chunks`` and ``SSEDecoder.iter_bytes``), decodes each line to ``str`` and builds a
``ServerSentEvent`` per blank line; a tool round's reply is a dozen events, and that stack was about a tenth
of the loop's model call CPU (issue 34, session 6). :func:`sse_events` reads the same bytes in one
generator: lines split on ``\r\n``, ``\n`` or ``\r`` (a ``\r`` that ends a network chunk waits for the
next one, which may start with its ``\n``), a blank line dispatches, ``:`` starts a comment, a field's
value loses one leading space, ``data`` lines are joined by ``\n``, ``id`` and ``retry`` are ignored (the
SDK's stream never reads them), and what follows the last blank line is not an event. It yields ``(event,
data)`` for each dispatched event that has a name (an empty one is none: the SDK's stream skips those).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic_core import from_json

_ENDS = (b"\n", b"\r")


def sse_events(chunks: Iterable[bytes]) -> Iterator[tuple[str, str]]:
    """``(event, data)`` of each named event in the byte stream ``chunks``."""
    event: bytes | None = None
    data: list[bytes] = []
    pending = b""
    for chunk in chunks:
        if pending:
            chunk = pending + chunk
        lines = chunk.splitlines(keepends=True)
        last = lines[-1] if lines else b"\n"
        if last.endswith(b"\n"):
            pending = b""
        else:  # an unfinished line, or one that ends in a "\r" whose "\n" may come next
            pending = lines.pop()
        for line in lines:
            line = line.rstrip(b"\r\n")
            if not line:
                if event:
                    yield event.decode(), b"\n".join(data).decode()
                event, data = None, []
                continue
            if line[:1] == b":":
                continue
            name, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if name == b"event":
                event = value
            elif name == b"data":
                data.append(value)
    if pending.endswith(_ENDS) and pending.rstrip(b"\r\n") == b"" and event:
        yield event.decode(), b"\n".join(data).decode()  # a stream that ends on its blank line's "\r"


def json_value(text: str) -> Any:
    """``json.loads(text)``: read by pydantic-core's parser (one C call; ``json.loads`` is three Python
    calls around its scanner and ~3-4x the CPU on a stream event). What that parser refuses (a lone
    surrogate escape, which ``json.loads`` keeps; anything malformed) is read by ``json.loads``, so the
    value, or the ``JSONDecodeError``, is what ``json.loads`` gives.

    Only keys go through pydantic-core's process-wide string cache (``cache_strings="keys"``): its default
    also caches every value of up to 64 characters (message and tool-call ids, short text deltas) in a
    16,384-slot table that a long-lived worker fills with strings it never sees again, ~1.3 MiB of them
    (the soak's loop workers grew +0.27 MiB a 1,000 turns, slowing, until it was full). Keys repeat, so
    caching them is free; values do not, and cost the same parsed either way (~1.4 us an event)."""
    try:
        return from_json(text, cache_strings="keys")
    except ValueError:
        return json.loads(text)
