"""One dispatch idiom for every service: a typed ``{message type: handler}`` table checked by the catalogue.

A handler takes ``(body, request)``: the body already validated as the type's declared model, the request
for its envelope (sender, session). A table with a type the catalogue does not declare, or a handler whose
annotated body model is not the declared one, fails at start-up; a request of a type the table lacks is a
``BadRequest`` naming the service.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, get_type_hints

from pydantic import BaseModel

from geode.protocol.catalog import load_all
from geode.protocol.errors import BadRequest
from geode.protocol.transport import Request

Reply = BaseModel | dict[str, Any] | None
Handler = Callable[[Any, Request], Reply]


class Dispatch:
    """The routing table of one service; ``handle`` is what the bus (or a test) calls."""

    def __init__(self, owner: str, routes: Mapping[str, Handler]) -> None:
        catalogue = load_all()
        unknown = sorted(t for t in routes if t not in catalogue)
        if unknown:
            raise ValueError(f"{owner}: message types not in the protocol catalogue: {', '.join(unknown)}")
        for type_, handler in routes.items():
            declared = catalogue[type_].body
            annotated = _body_annotation(handler)
            if annotated is not None and annotated is not declared and not issubclass(declared, annotated):
                raise TypeError(
                    f"{owner}: handler for {type_} takes {annotated.__name__}, the catalogue declares "
                    f"{declared.__name__}"
                )
        self.owner = owner
        self.routes: dict[str, Handler] = dict(routes)

    @property
    def types(self) -> frozenset[str]:
        return frozenset(self.routes)

    def handle(self, request: Request) -> Reply:
        route = self.routes.get(request.type)
        if route is None:
            raise BadRequest(f"{self.owner} does not handle {request.type!r}")
        return route(request.body, request)


def _body_annotation(handler: Handler) -> type[BaseModel] | None:
    """The pydantic model a handler's first parameter is annotated with, if it says."""
    try:
        params = list(inspect.signature(handler).parameters.values())
        hints = get_type_hints(handler)
    except (TypeError, ValueError, NameError):
        return None
    if not params:
        return None
    hint = hints.get(params[0].name)
    return hint if isinstance(hint, type) and issubclass(hint, BaseModel) else None
