"""The encoded messages of a conversation's requests, reused from one round's request to the next.

A turn's request ``n + 1`` sends the messages of request ``n`` (the very same message objects) plus the
round's new ones. :class:`EncodedHistory` keeps, per conversation (the request's ``session_id``), the
messages last sent and their encoded wire params; the next request reuses them for the leading messages
it shares with the last one (all of them, or up to a change near the end in a compacted view): only the
others are encoded (each once per message object, :class:`~geode.providers.identity_memo.IdentityMemo`)
and the rest is reused, so a round's request body costs what its new messages cost, not the whole history.
A message with a picture is projected on every request (its file is read and verified each time).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from geode.conversation import Message
from geode.providers.identity_memo import IdentityMemo, common_prefix

Encode = Callable[[Message], bytes]


class EncodedHistory:
    """``items(key, messages)``: each message's encoded param, in order (a fresh list the caller may keep)."""

    def __init__(self, encode: Encode, *, conversations: int = 8) -> None:
        self._encode = encode
        self._memo: IdentityMemo[bytes] = IdentityMemo()
        self._last: dict[str, tuple[list[Message], list[bytes], tuple[int, ...]]] = {}
        self._limit = conversations
        self._lock = threading.Lock()
        self.encoded = 0  # messages encoded (a work count for the tests)

    def items(self, key: str, messages: Sequence[Message], with_pictures: Encode) -> list[bytes]:
        """``with_pictures`` encodes a message that has a picture (every time it is sent)."""
        with self._lock:
            last = self._last.get(key)
        if last is not None:  # what it shares with the last request (a compacted view: up to a change)
            begin = common_prefix(last[0], messages)
            out, pictures = last[1][:begin], [i for i in last[2] if i < begin]
            for i in pictures:
                out[i] = with_pictures(messages[i])
        else:
            begin, out, pictures = 0, [], []
        for i in range(begin, len(messages)):
            m = messages[i]
            if m.images:
                pictures.append(i)
                out.append(with_pictures(m))
            else:
                out.append(self._memo.get(m, self._counted))
        with self._lock:
            self._last.pop(key, None)
            self._last[key] = (list(messages), out, tuple(pictures))
            while len(self._last) > self._limit:  # the least recently sent conversation goes first
                self._last.pop(next(iter(self._last)))
        return list(out)

    def _counted(self, m: Message) -> bytes:
        self.encoded += 1
        return self._encode(m)
