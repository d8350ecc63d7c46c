"""One pydantic validation per received request: the envelope and its body checked together.

For every catalogued message type, one compiled model (built on first use, then cached) has the envelope's
fields with ``body`` typed as the type's catalogued body model. :func:`decode_request` validates a request or
cast frame with it once, instead of validating the envelope and then the body again; what it gives back is
the same ``Envelope`` (its body the received map) and the body model the handler takes (docs/runtime.md,
"Served requests"). Error messages are the ones the two-step path gave: ``invalid envelope: ...`` for the
envelope, ``invalid <type> body at <where>: ...`` for the body.
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from geode.protocol import catalog
from geode.protocol.codec import MAX_FRAME_BYTES, decode_raw, validate_envelope
from geode.protocol.envelope import Envelope, trusted
from geode.protocol.errors import BadRequest
from geode.work_tally import FRAME_DECODED, VALIDATION
from geode.work_tally import count as tally
from geode.work_tally import frame as tally_frame

Received = BaseModel | BadRequest | None  # a body as decode_request leaves it (see there)
_SERVED_KINDS = ("request", "cast")
_models: dict[str, type[BaseModel]] = {}
_lock = threading.Lock()


def decode_request(frame: bytes, *, max_frame: int = MAX_FRAME_BYTES) -> tuple[Envelope, Received]:
    """Decode a frame a served socket received, validating it once: a request or cast of a catalogued type
    with its body in one pass, anything else as ``codec.decode`` does.

    Returns the envelope and its body: the body model; or the ``BadRequest`` its refused body is answered with
    (the envelope was valid, so the reply correlates and a cast stays unanswered); or ``None`` when the body
    was not validated here (a reply, a type the catalogue lacks: ``dispatch`` says so). An invalid envelope
    raises ``BadRequest`` as ``codec.decode`` does."""
    obj = decode_raw(frame, max_frame=max_frame)
    type_ = obj.get("type")
    model = None
    served = obj.get("kind", "request") in _SERVED_KINDS and type(obj.get("body", {})) is dict
    if served and isinstance(type_, str):
        model = typed_model(type_)
    if model is None:
        return validate_envelope(obj), None
    tally(VALIDATION, type_)
    out = _validate(model, obj)
    if isinstance(out, BadRequest):  # the envelope is valid, its body is not: answered by dispatch
        return validate_envelope(obj), out
    tally_frame(FRAME_DECODED, out[0].type)
    return out


def typed_model(type_: str) -> type[BaseModel] | None:
    """The envelope-with-typed-body model of a catalogued type (``None`` for a type not in the catalogue)."""
    model = _models.get(type_)
    if model is not None:
        return model
    try:
        body_model = catalog.spec(type_).body
    except BadRequest:
        return None  # not cached: a frame's type is any string a sender chose
    fields: dict[str, Any] = {}
    for name, info in Envelope.model_fields.items():
        if name == "body":
            fields[name] = (body_model, Field(default_factory=dict, validate_default=True))
        else:
            fields[name] = (info.annotation, info)
    with _lock:
        model = _models.get(type_)
        if model is None:
            config = ConfigDict(extra="forbid", frozen=True)
            model = create_model(f"Envelope[{type_}]", __config__=config, **fields)
            _models[type_] = model
    return model


def _validate(model: type[BaseModel], obj: dict[str, Any]) -> tuple[Envelope, BaseModel] | BadRequest:
    """``(envelope, body model)``; a body the model refuses comes back as the ``BadRequest`` to answer with
    (the envelope itself was valid); an invalid envelope raises it."""
    try:
        typed = model.model_validate(obj)
    except ValidationError as exc:
        errors = exc.errors()
        for err in errors:
            if err["loc"][:1] != ("body",):
                raise BadRequest(f"invalid envelope: {err.get('msg', 'invalid')}"[:300]) from exc
        first = errors[0]
        where = ".".join(str(p) for p in first.get("loc", ())[1:])
        return BadRequest(f"invalid {obj['type']} body at {where or '<root>'}: {first.get('msg')}"[:500])
    fields = dict(typed.__dict__)
    body = fields["body"]
    fields["body"] = obj.get("body", {})  # the map as received: what Envelope.body always held
    return trusted(fields), body
