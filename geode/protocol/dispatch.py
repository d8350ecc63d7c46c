"""One dispatch idiom for every service: a typed ``{message type: handler}`` table checked by the catalogue.

A handler takes ``(body, request)``: the body already validated as the type's declared model, the request
for its envelope (sender, session). A table with a type the catalogue does not declare, or a handler whose
annotated body model is not the declared one, fails at start-up; a request of a type the table lacks is a
``BadRequest`` naming the service.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast, get_type_hints

from pydantic import BaseModel

from geode.protocol.catalog import load_all
from geode.protocol.errors import BadRequest
from geode.protocol.later import Later
from geode.protocol.transport import DEFERRED_CAP_S, Request

Reply = BaseModel | dict[str, Any] | None
Handler = Callable[[Any, Request], Reply]
LaterHandler = Callable[[Any, Request], Reply | Later]  # may defer its reply (docs/runtime.md)


class Dispatch:
    """The routing table of one service; ``handle`` is what the bus (or a test) calls."""

    def __init__(
        self,
        owner: str,
        routes: Mapping[str, Handler],
        *,
        deferred: Mapping[str, LaterHandler] | None = None,
        inline: Iterable[str] = (),
    ) -> None:
        """``deferred``: routes that may return a ``Later`` (served through :meth:`handle_later`).
        ``inline``: types cheap and non-blocking enough to run on the bus thread (no lock held across a
        round trip, no waiting: a handler that must wait returns a ``Later``); the bus reads
        ``inline_types``."""
        catalogue = load_all()
        both = sorted(set(routes) & set(deferred or {}))
        if both:
            raise ValueError(f"{owner}: routed twice: {', '.join(both)}")
        table: dict[str, LaterHandler] = {**routes, **(deferred or {})}
        unknown = sorted(t for t in table if t not in catalogue)
        if unknown:
            raise ValueError(f"{owner}: message types not in the protocol catalogue: {', '.join(unknown)}")
        for type_, handler in table.items():
            declared = catalogue[type_].body
            annotated = _body_annotation(handler)
            if annotated is not None and annotated is not declared and not issubclass(declared, annotated):
                raise TypeError(
                    f"{owner}: handler for {type_} takes {annotated.__name__}, the catalogue declares "
                    f"{declared.__name__}"
                )
        self.owner = owner
        self.routes = table
        self.deferred = frozenset(deferred or {})
        self.inline_types = frozenset(inline)
        if not self.inline_types <= self.types:
            raise ValueError(f"{owner}: inline types not routed: {sorted(self.inline_types - self.types)}")

    @property
    def plain_routes(self) -> dict[str, Handler]:
        """The routes that never defer (what a wrapper may re-route as plain routes)."""
        return {t: cast(Handler, h) for t, h in self.routes.items() if t not in self.deferred}

    @property
    def types(self) -> frozenset[str]:
        return frozenset(self.routes)

    def handle(self, request: Request) -> Reply:
        """Run the route; a deferred route's reply is waited for here (see :meth:`handle_later`)."""
        route = self.routes.get(request.envelope.type)  # (handle_later's body: no call, no property)
        if route is None:
            raise BadRequest(f"{self.owner} does not handle {request.type!r}")
        out = route(request.body, request)
        return out.result(DEFERRED_CAP_S) if isinstance(out, Later) else out

    def handle_later(self, request: Request) -> Reply | Later:
        """Run the route; a deferred route may return a ``Later`` (what the bus and ``dispatch`` take)."""
        route = self.routes.get(request.envelope.type)
        if route is None:
            raise BadRequest(f"{self.owner} does not handle {request.type!r}")
        return route(request.body, request)


def _body_annotation(handler: LaterHandler) -> type[BaseModel] | None:
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
