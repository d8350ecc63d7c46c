"""The encoded messages of a conversation's requests, reused from one round's request to the next.

A turn's request ``n + 1`` sends the messages of request ``n`` (the very same message objects) plus the
round's new ones. :class:`EncodedHistory` keeps, per conversation (the request's ``session_id``), the
messages last sent, their encoded wire params and those params already joined into the array's content, in
pieces whose sizes shrink geometrically (the oldest the largest). The next request reuses all of it for the
leading messages it shares with the last one (all of them, or up to a change near the end in a compacted
view): only the others are encoded (each once per message object,
:class:`~geode.providers.identity_memo.IdentityMemo`) and joined as a new piece, merged with the last ones
while they are of a size, so a round's body costs what its new messages cost (amortized), not the whole
history: the large pieces go to the socket as they are (:func:`~geode.providers.adapter_base.body_chunks`),
never copied into one buffer. A message with a picture is projected on every request (its file is read and
verified each time): it is a piece of its own, encoded anew.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from geode.conversation import Message
from geode.providers.identity_memo import IdentityMemo, common_prefix

Encode = Callable[[Message], bytes]

SEP = b", "


@dataclass
class _Piece:
    """Messages ``start``..``end`` (exclusive): ``data`` is their params, each led by ``SEP`` except the
    array's first; ``picture`` marks a message with a picture (its data is made per request)."""

    start: int
    end: int
    data: bytes = b""
    picture: bool = False


@dataclass
class _Conversation:
    messages: Sequence[Message] = ()
    items: list[bytes] = field(default_factory=list)  # each message's encoded param (b"": none)
    pieces: list[_Piece] = field(default_factory=list)


class EncodedHistory:
    """``joined(key, messages, with_pictures)``: the messages' encoded params, joined by ``", "`` (empty ones
    left out), as consecutive pieces (their concatenation is the JSON array's content, brackets excluded)."""

    def __init__(self, encode: Encode, *, conversations: int = 8) -> None:
        self._encode = encode
        self._memo: IdentityMemo[bytes] = IdentityMemo()
        self._last: dict[str, _Conversation] = {}
        self._limit = conversations
        self._lock = threading.Lock()
        self.encoded = 0  # messages encoded (a work count for the tests)
        self.copied = 0  # bytes of kept params joined again (a work count for the tests)

    def joined(self, key: str, messages: Sequence[Message], with_pictures: Encode) -> list[bytes]:
        """``with_pictures`` encodes a message that has a picture (every time it is sent)."""
        with self._lock:  # a conversation's state changes in place: one adapter's requests take turns here
            conv = self._last.pop(key, None) or _Conversation()
            self._last[key] = conv  # the most recently sent conversation last
            while len(self._last) > self._limit:
                self._last.pop(next(iter(self._last)))
            begin = common_prefix(conv.messages, messages) if conv.messages else 0
            if begin < len(conv.items):
                self._cut(conv, begin)
            run = begin  # the first message of the run of new messages without a picture
            for i in range(begin, len(messages)):
                m = messages[i]
                if m.images:
                    self._append(conv, run, i)
                    conv.items.append(b"")
                    conv.pieces.append(_Piece(i, i + 1, picture=True))
                    run = i + 1
                else:
                    conv.items.append(self._memo.get(m, self._counted))
            self._append(conv, run, len(messages))
            conv.messages = messages
            return self._out(conv, messages, with_pictures)

    def _cut(self, conv: _Conversation, begin: int) -> None:
        """Forget the messages from ``begin`` on (the new request differs there)."""
        del conv.items[begin:]
        while conv.pieces and conv.pieces[-1].start >= begin:
            conv.pieces.pop()
        if conv.pieces and conv.pieces[-1].end > begin:  # a piece cut inside: its kept messages joined again
            last = conv.pieces.pop()
            data = self._data(conv, last.start, begin)
            self.copied += len(data)
            conv.pieces.append(_Piece(last.start, begin, data))

    def _append(self, conv: _Conversation, start: int, end: int) -> None:
        """Messages ``start``..``end`` (no pictures) as a new piece, then merged with the pieces before it
        while one is not more than twice the next (so the pieces shrink geometrically: O(log n) of them,
        and a kept param is copied O(log n) times in the conversation's life, not once per request)."""
        if start >= end:
            return
        pieces = conv.pieces
        pieces.append(_Piece(start, end, self._data(conv, start, end)))
        while len(pieces) > 1 and not pieces[-2].picture and len(pieces[-2].data) <= 2 * len(pieces[-1].data):
            last = pieces.pop()
            first = pieces.pop()
            self.copied += len(first.data) + len(last.data)
            pieces.append(_Piece(first.start, last.end, first.data + last.data))

    def _data(self, conv: _Conversation, start: int, end: int) -> bytes:
        """Messages ``start``..``end`` joined, led by ``SEP`` when a param comes before them (the pieces
        before ``start`` say so: a picture always encodes to one)."""
        parts = [i for i in conv.items[start:end] if i]
        if not parts:
            return b""
        lead = any(p.picture or p.data for p in conv.pieces if p.end <= start)
        return (SEP if lead else b"") + SEP.join(parts)

    @staticmethod
    def _out(conv: _Conversation, messages: Sequence[Message], with_pictures: Encode) -> list[bytes]:
        out: list[bytes] = []
        for p in conv.pieces:
            data = with_pictures(messages[p.start]) if p.picture else p.data
            if not data:
                continue
            if p.picture and out:
                out.append(SEP)
            out.append(data)
        if out and out[0].startswith(SEP):  # only pictures that encoded to nothing came before it
            out[0] = out[0][len(SEP) :]
        return out

    def _counted(self, m: Message) -> bytes:
        self.encoded += 1
        return self._encode(m)
