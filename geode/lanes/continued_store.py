"""The lanes child's store client: :class:`StoreClient` plus ``put_turn_then``, a turn record's put continued
by callback (``calls``: the shell's ``actors.bus.continued.ContinuedCalls``), so no ``lanes-store`` thread is
woken to send it and wait for its reply (issue 34: ~5.5 context switches a store round trip on that pool, 2
round trips a turn).

Same request, same reply validation, same retries as :meth:`StoreClient.put_turn`: a retryable error
(timeout, unavailable, not ready, overloaded) is retried with the client's backoff on a pool thread
(``offload``), the rare path, until ``attempts`` are spent; the outcome goes to the callback either way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from geode.protocol import store as m
from geode.protocol.errors import GeodeError
from geode.protocol.transport import Transport
from geode.records.models import TurnRecord
from geode.records.store_client import RETRYABLE, StoreClient
from geode.work_tally import STORE_CALL
from geode.work_tally import count as tally

Outcome = Any  # the stored record, or the exception the put ended with
Then = Callable[[Outcome], None]


class Calls(Protocol):
    """Requests whose reply (its body, or the typed error) goes to ``then`` (``ContinuedCalls``)."""

    def call(
        self,
        target: str,
        type_: str,
        body: Any,
        then: Then,
        *,
        session: str | None = None,
        timeout_s: float = 5.0,
    ) -> None: ...


def _stored(body: dict[str, Any]) -> TurnRecord:
    out = m.TurnReply.model_validate(body).turn
    assert out is not None
    return out


class LanesStoreClient(StoreClient):
    """A :class:`StoreClient` whose ``put_turn_then`` completes by callback (``calls``: over lanes' bus)."""

    def __init__(
        self,
        transport: Transport,
        calls: Calls,
        offload: Callable[[Callable[[], None]], None],
        **options: Any,
    ) -> None:
        super().__init__(transport, **options)
        self.calls = calls
        self.offload = offload  # runs a blocking retry on a pool thread

    def put_turn_then(self, turn: TurnRecord, then: Then) -> None:
        """``put_turn(turn)``'s outcome (the record as stored, or its error) handed to ``then``, once, on the
        thread that completed it (the bus thread for a reply). Raises only when the bus is not running."""

        def replied(out: Outcome) -> None:
            if isinstance(out, GeodeError):
                if out.code in RETRYABLE and self.attempts > 1:
                    self.offload(lambda: then(self._retry(turn)))
                    return
                then(out)
                return
            try:
                rec: Outcome = _stored(out)
            except Exception as exc:  # a reply that is not a turn record: the put's error, as put_turn's
                rec = exc
            then(rec)

        tally(STORE_CALL, m.TURN_PUT)
        self.calls.call(
            self.target, m.TURN_PUT, turn, replied, session=turn.session_id, timeout_s=self.timeout_s
        )

    def _retry(self, turn: TurnRecord) -> Outcome:
        """The attempts after the first, as ``_call`` makes them (backoff first): the outcome (not raised)."""
        delay = self.backoff_s
        for i in range(1, self.attempts):
            self.retries += 1
            time.sleep(delay)
            delay = min(delay * 2, self.max_backoff_s)
            tally(STORE_CALL, m.TURN_PUT)
            try:
                return _stored(
                    self.transport.call(
                        self.target, m.TURN_PUT, turn, session=turn.session_id, timeout_s=self.timeout_s
                    )
                )
            except GeodeError as exc:
                if exc.code not in RETRYABLE or i == self.attempts - 1:
                    return exc
            except Exception as exc:
                return exc
        raise AssertionError("unreachable")
