"""Serve a pykka actor on the bus: requests reach it as ``ask``, casts as ``tell`` (one mailbox, in order)."""

from __future__ import annotations

from typing import Any

import pykka
from pydantic import BaseModel

from geode.protocol.errors import RequestTimeout, Unavailable
from geode.protocol.transport import Request


class ActorService:
    """A Service whose ``handle`` forwards to ``ref``; the actor's ``on_receive(request)`` returns the reply.

    Use it when a component needs actor semantics (one message at a time, private state) behind an endpoint:
    ``bus.serve("store", ActorService(StoreActor.start()))``. Exceptions raised by the actor on an ``ask``
    travel back to the caller as usual (``GeodeError`` → its code, anything else → ``internal``).
    """

    def __init__(self, ref: pykka.ActorRef[Any], *, ask_timeout_s: float = 30.0) -> None:
        self.ref = ref
        self.ask_timeout_s = ask_timeout_s

    def handle(self, request: Request) -> BaseModel | dict[str, Any] | None:
        try:
            if request.envelope.kind == "cast":
                self.ref.tell(request)
                return None
            return self.ref.ask(request, timeout=self._timeout(request))  # type: ignore[no-any-return]
        except pykka.ActorDeadError as exc:
            raise Unavailable(f"actor {self.ref} is stopped") from exc
        except pykka.Timeout as exc:
            raise RequestTimeout(f"actor {self.ref} did not answer in time") from exc

    def _timeout(self, request: Request) -> float:
        deadline = request.envelope.deadline
        if deadline is None:
            return self.ask_timeout_s
        from geode.protocol.envelope import now_ms

        return max(0.0, min(self.ask_timeout_s, (deadline - now_ms()) / 1000))
