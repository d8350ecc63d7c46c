"""One pydantic validation per received request: the envelope and its body checked together.

For every catalogued message type, one compiled pydantic-core validator (built on first use from the models'
own core schemas, then cached) has the envelope's fields with ``body`` typed as the type's catalogued body
model. :func:`decode_request` validates a request or cast frame with it once, instead of validating the
envelope and then the body again; what it gives back is the same ``Envelope`` (its body the received map) and
the body model the handler takes (docs/runtime.md, "Served requests"). Error messages are the ones the
two-step path gave: ``invalid envelope: ...`` for the envelope, ``invalid <type> body at <where>: ...`` for
the body.
"""

from __future__ import annotations

import threading
from typing import Any, cast

from pydantic import BaseModel, ValidationError
from pydantic_core import CoreConfig, CoreSchema, SchemaValidator

from geode.protocol import catalog, codec
from geode.protocol.codec import MAX_FRAME_BYTES, bin_walked, envelope_refused, validate_envelope
from geode.protocol.envelope import Envelope, trusted
from geode.protocol.errors import BadRequest
from geode.protocol.frame_unpack import decode_map
from geode.work_tally import FRAME_DECODED, VALIDATION
from geode.work_tally import ON as TALLY_ON
from geode.work_tally import count as tally
from geode.work_tally import frame as tally_frame

Received = BaseModel | BadRequest | None  # a body as decode_request leaves it (see there)
_SERVED_KINDS = ("request", "cast")
_models: dict[str, SchemaValidator] = {}
_lock = threading.Lock()


def decode_request(frame: bytes, *, max_frame: int = MAX_FRAME_BYTES) -> tuple[Envelope, Received]:
    """Decode a frame a served socket received, validating it once: a request or cast of a catalogued type
    with its body in one pass, anything else as ``codec.decode`` does.

    Returns the envelope and its body: the body model; or the ``BadRequest`` its refused body is answered with
    (the envelope was valid, so the reply correlates and a cast stays unanswered); or ``None`` when the body
    was not validated here (a reply, a type the catalogue lacks: ``dispatch`` says so). An invalid envelope
    raises ``BadRequest`` as ``codec.decode`` does."""
    obj = decode_map(frame, max_frame, bin_walked)  # (codec.decode_fast without its call: every frame)
    type_ = obj.get("type")
    model = None
    served = obj.get("kind", "request") in _SERVED_KINDS and type(obj.get("body", {})) is dict
    if served and isinstance(type_, str):
        model = _models.get(type_)  # (the cache first: no call once built)
        if model is None:
            model = typed_model(type_)
    if model is None:  # (a reply, most often: codec.validate_envelope without its call)
        try:
            env = codec._validate_envelope(obj)  # (read here: one validator, as validate_envelope's)
        except ValidationError as exc:
            raise envelope_refused(exc) from exc
        if TALLY_ON:
            tally_frame(FRAME_DECODED, env.type)
            tally(VALIDATION, env.type)
        return env, None
    if TALLY_ON:
        tally(VALIDATION, type_)
    out = _validate(model, obj)
    if isinstance(out, BadRequest):  # the envelope is valid, its body is not: answered by dispatch
        return validate_envelope(obj), out
    if TALLY_ON:
        tally_frame(FRAME_DECODED, out[0].type)
    return out


def typed_model(type_: str) -> SchemaValidator | None:
    """The envelope-with-typed-body validator of a catalogued type (``None`` for a type not in the catalogue).

    Built from the models' own core schemas (the envelope's fields, the body's model schema in place of its
    map), which pydantic-core compiles in ~30 µs; a ``create_model`` class takes ~5 ms and 30 KiB a type."""
    validator = _models.get(type_)
    if validator is not None:
        return validator
    try:
        body_schema = catalog.spec(type_).body.__pydantic_core_schema__
    except BadRequest:
        return None  # not cached: a frame's type is any string a sender chose
    fields = dict(_ENVELOPE_FIELDS["fields"])
    fields["body"] = {
        **fields["body"],
        "schema": {
            "type": "default",
            "schema": body_schema,
            "default_factory": dict,
            "validate_default": True,
        },
    }
    validator = SchemaValidator(cast(CoreSchema, {**_ENVELOPE_FIELDS, "fields": fields}), _ENVELOPE_CONFIG)
    with _lock:
        return _models.setdefault(type_, validator)


def _envelope_fields() -> dict[str, Any]:
    """The ``model-fields`` core schema of ``Envelope`` (its fields, extra forbidden by the config)."""
    schema = cast(dict[str, Any], Envelope.__pydantic_core_schema__)
    if schema.get("type") != "model" or schema["schema"].get("type") != "model-fields":
        raise RuntimeError("Envelope's core schema is not a plain model: typed_frames needs updating")
    return cast(dict[str, Any], schema["schema"])


_ENVELOPE_FIELDS = _envelope_fields()
_ENVELOPE_CONFIG = cast(CoreConfig, Envelope.__pydantic_core_schema__.get("config"))


def _validate(validator: SchemaValidator, obj: dict[str, Any]) -> tuple[Envelope, BaseModel] | BadRequest:
    """``(envelope, body model)``; a body the model refuses comes back as the ``BadRequest`` to answer with
    (the envelope itself was valid); an invalid envelope raises it."""
    try:
        fields, _, fields_set = validator.validate_python(obj)
    except ValidationError as exc:
        errors = exc.errors()
        for err in errors:
            if err["loc"][:1] != ("body",):
                raise BadRequest(f"invalid envelope: {err.get('msg', 'invalid')}"[:300]) from exc
        first = errors[0]
        where = ".".join(str(p) for p in first.get("loc", ())[1:])
        return BadRequest(f"invalid {obj['type']} body at {where or '<root>'}: {first.get('msg')}"[:500])
    body = fields["body"]
    fields["body"] = obj.get("body", {})  # the map as received: what Envelope.body always held
    return trusted(fields, fields_set), body
