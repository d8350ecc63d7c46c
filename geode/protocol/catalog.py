"""The message catalogue: every message type maps to a pydantic body model (and a reply model).

Area modules (``geode.protocol.<area>``) declare their messages with :func:`message`. A receiver validates
a body with :func:`parse_body`; an unknown type or an invalid body is a ``BadRequest``.
"""

from __future__ import annotations

import builtins
import importlib
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from geode.protocol.errors import BadRequest
from geode.work_tally import VALIDATION, VALIDATION_REPLY
from geode.work_tally import count as tally
from geode.work_tally import frame as tally_frame

AREAS = (
    "runtime",
    "store",
    "ledger",
    "tools",
    "turns",
    "lanes",
    "control",
    "messengers",
    "schedule",
    "webhooks",
    "intake",
    "search",
)


@dataclass(frozen=True)
class MessageSpec:
    type: str
    body: builtins.type[BaseModel]  # builtins.: the field ``type`` above shadows the builtin here
    reply: builtins.type[BaseModel] | None
    doc: str
    area: str


_CATALOG: dict[str, MessageSpec] = {}
_loaded = False


def message(type_: str, body: type[BaseModel], reply: type[BaseModel] | None = None, doc: str = "") -> str:
    """Declare a message type. Returns the type string so area modules can keep it as a constant."""
    area = body.__module__.rsplit(".", 1)[-1]
    existing = _CATALOG.get(type_)
    if existing is not None and (existing.body is not body or existing.reply is not reply):
        raise ValueError(f"message type {type_!r} declared twice")
    _CATALOG[type_] = MessageSpec(type_, body, reply, doc or (body.__doc__ or "").strip(), area)
    return type_


def load_all() -> dict[str, MessageSpec]:
    """Import every area module so the catalogue is complete."""
    global _loaded
    if not _loaded:
        for area in AREAS:
            importlib.import_module(f"geode.protocol.{area}")
        _loaded = True
    return dict(_CATALOG)


def spec(type_: str) -> MessageSpec:
    if type_ not in _CATALOG:
        load_all()
    try:
        return _CATALOG[type_]
    except KeyError:
        raise BadRequest(f"unknown message type {type_!r}") from None


def parse_body(type_: str, body: dict[str, Any]) -> BaseModel:
    """Validate a request/cast body against its declared model."""
    s = spec(type_)
    tally_frame(VALIDATION, type_)
    try:
        return s.body.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise BadRequest(f"invalid {type_} body at {where or '<root>'}: {first.get('msg')}"[:500]) from exc


def parse_reply(type_: str, body: dict[str, Any]) -> BaseModel | dict[str, Any]:
    s = spec(type_)
    if s.reply is None:
        return body
    tally(VALIDATION_REPLY, type_)
    try:
        return s.reply.model_validate(body)
    except ValidationError as exc:
        raise BadRequest(f"invalid {type_} reply: {exc.errors()[0].get('msg')}"[:500]) from exc


def dump(model: BaseModel | dict[str, Any] | None) -> dict[str, Any]:
    """A body model as a msgpack-ready dict (``None`` → empty body): ``model_dump(mode="json",
    exclude_none=True)`` by the model's serializer itself, without ``model_dump``'s Python wrapper and its
    dozen defaults (a small reply: 2.0 -> 0.7 us; no model of the catalogue overrides ``model_dump``)."""
    if model is None:
        return {}
    if isinstance(model, BaseModel):
        out: dict[str, Any] = model.__pydantic_serializer__.to_python(model, mode="json", exclude_none=True)
        return out
    return model
