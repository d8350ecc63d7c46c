"""A session's catch-up for ``cli.attach``: lanes' replay from a seq, or, while lanes does not answer (it is
restarting, again and again under repeated kills), the session's durable turn outcomes read from the store."""

from __future__ import annotations

import logging

from geode.lanes.state import RECENT_OUTCOMES, outcome_row
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol.errors import GeodeError
from geode.protocol.transport import Transport
from geode.records.models import TurnState
from geode.records.store_client import StoreClient

log = logging.getLogger(__name__)

LANES_REPLAY_S = 1.0  # a live lanes answers a replay in milliseconds; past this, the store answers instead
STORE_OUTCOMES_S = 0.8  # the client waits 2 s for the whole attach


class SessionReplay:
    """lanes' replay of a session's events, or the store's outcomes of its done turns."""

    def __init__(self, transport: Transport, lanes: str = "lanes") -> None:
        self.transport, self.lanes = transport, lanes
        self.store = StoreClient(transport, timeout_s=STORE_OUTCOMES_S, attempts=1)

    def from_lanes(self, session_id: str, after_seq: int) -> lanes_msg.Replayed:
        """lanes' replay; raises the ``GeodeError`` of a lanes that does not answer in time."""
        body = lanes_msg.Replay(session_id=session_id, after_seq=after_seq)
        reply = self.transport.call(self.lanes, lanes_msg.REPLAY, body, timeout_s=LANES_REPLAY_S)
        return lanes_msg.Replayed.model_validate(reply)

    def from_store(self, session_id: str, lanes_error: GeodeError) -> c.Attached:
        """No events (lanes holds the stream), but every turn of the session that is done, with its outcome:
        a client whose turn ended while lanes kept dying learns its answer without waiting for one lanes to
        live long enough to reply. Raises ``lanes_error`` when the store does not answer either."""
        try:
            done = self.store.list_turns(state=TurnState.DONE.value, session_id=session_id)
        except GeodeError as exc:
            log.info(
                "attach %s: neither lanes (%s) nor the store (%s) answered", session_id, lanes_error, exc
            )
            raise lanes_error from None
        outcomes = [outcome_row(t) for t in done[-RECENT_OUTCOMES:]]
        log.info(
            "attach %s: lanes did not answer (%s); %d outcome(s) from the store",
            session_id,
            lanes_error.code.value,
            len(outcomes),
        )
        return c.Attached(session_id=session_id, replayed=0, complete=False, outcomes=outcomes)
