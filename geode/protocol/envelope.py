"""The envelope every bus message travels in (DESIGN.md §4), as a pydantic model."""

from __future__ import annotations

import itertools
import os
import random
import time
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

PROTOCOL_VERSION: Final = 1
MAX_TYPE_LEN = 64
TRACEPARENT_PATTERN: Final = r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"

# Seeded once from the OS (and again in every forked child): os.urandom per id is a GIL-releasing
# syscall on every message, which measurably convoys the bus's threads.
_rng = random.Random(os.urandom(32))
# a served reply's id (reply_wire): a random per-process prefix and a counter, as BusTransport's request ids
# (~0.5 us less a reply than new_id's clock read, random draw and two formats; nothing orders replies by id)
_reply_prefix = os.urandom(5).hex()
_reply_seq = itertools.count(1)


def _after_fork() -> None:
    global _reply_prefix
    _rng.seed(os.urandom(32))
    _reply_prefix = os.urandom(5).hex()


os.register_at_fork(after_in_child=_after_fork)


def new_id() -> str:
    """A unique message id (24 hex chars: time-ordered prefix + 56 random bits)."""
    return f"{time.time_ns() // 1_000_000:011x}{_rng.getrandbits(56):014x}"[:24]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Envelope(BaseModel):
    """One message: version, id, dotted type, correlation, sender, session, deadline and typed body.

    ``kind`` tells requests (a reply is owed), casts (one-way) and the two terminal reply kinds apart.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = PROTOCOL_VERSION
    id: str = Field(default_factory=new_id, min_length=1, max_length=64)
    kind: Literal["request", "cast", "ok", "error"] = "request"
    type: str = Field(min_length=1, max_length=MAX_TYPE_LEN, pattern=r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")
    corr: str | None = Field(default=None, max_length=64)
    sender: str = Field(alias="from", default="", max_length=128)
    session: str | None = Field(default=None, max_length=128)
    deadline: int | None = None
    body: dict[str, Any] = Field(default_factory=dict)
    # W3C traceparent of the sender's span: only with tracing on, only toward a peer that takes it (a peer of
    # the previous release forbids unknown fields); docs/observability.md
    trace: str | None = Field(default=None, max_length=55, pattern=TRACEPARENT_PATTERN)

    def reply_ok(self, body: dict[str, Any] | None = None, *, sender: str = "") -> Envelope:
        return _reply(self, "ok", body or {}, sender)

    def reply_error(self, code: str, message: str, *, sender: str = "") -> Envelope:
        return _reply(self, "error", {"code": code, "message": message[:2048]}, sender)

    def expired(self, at_ms: int | None = None) -> bool:
        return self.deadline is not None and (at_ms if at_ms is not None else now_ms()) > self.deadline


_FIELDS: Final = tuple(Envelope.model_fields)
_TEXT: Final = frozenset({str})  # a body's key types, checked in C: {*map(_typeof, body)} <= _TEXT
_typeof: Final = type  # (outgoing has a parameter named type)
_set_attr = object.__setattr__


def trusted(fields: dict[str, Any], fields_set: set[str] | None = None) -> Envelope:
    """An envelope from values already validated (every field of ``Envelope``, by field name), built without a
    second validation: what a receiver makes of a frame its typed model checked once, and a reply whose fields
    all come from a validated request (geode/protocol/typed_frames.py; docs/runtime.md)."""
    env = Envelope.__new__(Envelope)
    _set_attr(env, "__dict__", fields)
    _set_attr(env, "__pydantic_fields_set__", set(fields) if fields_set is None else fields_set)
    _set_attr(env, "__pydantic_extra__", None)
    _set_attr(env, "__pydantic_private__", None)
    return env


_sent_types: set[str] = (
    set()
)  # types an envelope of this process validated with once: a valid type stays valid


def _plain(
    id: str, type: str, body: Any, sender: str, session: str | None, deadline: int | None, trace: str | None
) -> bool:
    """True when an outgoing envelope's values pass ``Envelope``'s checks without pydantic: its type one this
    process validated once (then remembered), no trace, lengths in bounds, a plain map with text keys."""
    return (
        type in _sent_types
        and trace is None
        and 0 < len(id) <= 64
        and len(sender) <= 128
        and (session is None or (session.__class__ is str and len(session) <= 128))
        and (deadline is None or deadline.__class__ is int)
        and body.__class__ is dict
        and {*map(_typeof, body)} <= _TEXT  # text keys only (no subclass)
    )


def outgoing(
    *,
    id: str,
    kind: Literal["request", "cast"],
    type: str,
    body: dict[str, Any],
    sender: str,
    session: str | None = None,
    deadline: int | None = None,
    trace: str | None = None,
) -> Envelope:
    """An envelope this process sends, checked without pydantic where the check is trivial (``_plain``).
    Anything unusual (a type not seen yet, a trace, an odd value) goes through the model, which raises as it
    always did. The receiver validates the frame in any case: this check only catches our own mistakes
    early."""
    if _plain(id, type, body, sender, session, deadline, trace):
        fields = {"v": PROTOCOL_VERSION, "id": id, "kind": kind, "type": type, "corr": None, "sender": sender}
        fields.update(session=session, deadline=deadline, body=body, trace=trace)
        return trusted(fields)
    env = Envelope(
        id=id,
        kind=kind,
        type=type,
        body=body,
        session=session,
        deadline=deadline,
        trace=trace,
        **{"from": sender},
    )
    if len(_sent_types) < 4096:
        _sent_types.add(env.type)
    return env


def outgoing_wire(
    *,
    id: str,
    kind: Literal["request", "cast"],
    type: str,
    body: dict[str, Any],
    sender: str,
    session: str | None = None,
    deadline: int | None = None,
    trace: str | None = None,
) -> dict[str, Any]:
    """What :func:`outgoing` gives, as the map its frame is packed from (:func:`wire_map` of it), built
    straight from the values: no ``Envelope`` made to be read back (``BusTransport``'s requests and casts)."""
    if not _plain(id, type, body, sender, session, deadline, trace):
        env = outgoing(
            id=id,
            kind=kind,
            type=type,
            body=body,
            sender=sender,
            session=session,
            deadline=deadline,
            trace=trace,
        )
        return wire_map(env)
    out = {"v": PROTOCOL_VERSION, "id": id, "kind": kind, "type": type, "from": sender}
    if session is not None:
        out["session"] = session
    if deadline is not None:
        out["deadline"] = deadline
    out["body"] = body
    return out


_WIRE_FIELDS = ("v", "id", "kind", "type", "corr", "sender", "session", "deadline", "body", "trace")
if _FIELDS != _WIRE_FIELDS:  # a new envelope field must be added to wire_map and the *_wire builders too
    raise RuntimeError(f"Envelope fields changed: {_FIELDS}; update envelope.wire_map")


def wire_map(env: Envelope) -> dict[str, Any]:
    """What ``env.model_dump(by_alias=True, exclude_none=True)`` gives (same keys in the same order, so the
    same bytes), read straight off the validated model instead of through pydantic's serializer."""
    d = env.__dict__
    out = {"v": d["v"], "id": d["id"], "kind": d["kind"], "type": d["type"]}
    if d["corr"] is not None:
        out["corr"] = d["corr"]
    out["from"] = d["sender"]
    if d["session"] is not None:
        out["session"] = d["session"]
    if d["deadline"] is not None:
        out["deadline"] = d["deadline"]
    out["body"] = d["body"]
    if d["trace"] is not None:
        out["trace"] = d["trace"]
    return out


def from_wire(obj: dict[str, Any]) -> Envelope:
    """The envelope a wire map (made here, from checked values) stands for, without validating it again."""
    return trusted({f: obj.get("from" if f == "sender" else f) for f in _WIRE_FIELDS})


def _reply(request: Envelope, kind: Literal["ok", "error"], body: Any, sender: str) -> Envelope:
    """The reply to a validated request. Its type, id, session come from the request; only the body and the
    sender are new, so only they are checked (as ``Envelope`` would: a map with text keys, a bounded sender);
    anything else goes through the model and fails as it always did."""
    if type(body) is dict and len(sender) <= 128 and {*map(_typeof, body)} <= _TEXT:
        return trusted(
            {
                "v": PROTOCOL_VERSION,
                "id": new_id(),
                "kind": kind,
                "type": request.type,
                "corr": request.id,
                "sender": sender,
                "session": request.session,
                "deadline": None,
                "body": body,
                "trace": None,
            }
        )
    return Envelope(
        kind=kind, type=request.type, corr=request.id, session=request.session, body=body, **{"from": sender}
    )


reply_envelope = _reply  # (by its public name: geode/protocol/transport.py)


def reply_wire(request: Envelope, kind: Literal["ok", "error"], body: Any, sender: str) -> dict[str, Any]:
    """What :func:`_reply` gives, as the map its frame is packed from (:func:`wire_map` of it), built straight
    from the request's fields (the bus's served replies: no ``Envelope`` made to be read back)."""
    if type(body) is dict and len(sender) <= 128 and {*map(_typeof, body)} <= _TEXT:
        d = request.__dict__
        mid = f"{_reply_prefix}{next(_reply_seq):014x}"  # 24 hex chars, as new_id()'s
        out = {"v": PROTOCOL_VERSION, "id": mid, "kind": kind, "type": d["type"], "corr": d["id"]}
        out["from"] = sender
        if d["session"] is not None:
            out["session"] = d["session"]
        out["body"] = body
        return out
    return wire_map(_reply(request, kind, body, sender))


def error_wire(request: Envelope, code: str, message: str, sender: str) -> dict[str, Any]:
    """:meth:`Envelope.reply_error` as its wire map."""
    return reply_wire(request, "error", {"code": code, "message": message[:2048]}, sender)
