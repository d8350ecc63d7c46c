"""Control's side of a lanes restart: once the new lanes incarnation answers control, every ready client
connection is told to replay its session from the last seq it saw, and told again every ``REPEAT_S`` until
one bus hello later: the new lanes routes its pushes to control only after control's next hello (every
``HELLO_S``), and what it pushed before that (often the end of a turn a worker re-sent it) was dropped."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from geode.control.connection import Connection, ConnState
from geode.protocol import control as c
from geode.protocol import runtime
from geode.protocol.envelope import Envelope
from geode.protocol.errors import GeodeError
from geode.protocol.transport import Transport

log = logging.getLogger(__name__)
LINK_WAIT_S = 2.0  # how long to wait for the new lanes to answer before telling the clients anyway
PING_TIMEOUT_S = 0.3
HELLO_S = 1.0  # the bus's hello interval (actors/bus Bus(hello_interval_s)): lanes can push to us after it
REPEAT_S = 0.25  # the clients catch up this often until then (a catch-up is one lanes.replay per client)


def lanes_answers(transport: Transport, lanes: str, wait_s: float = LINK_WAIT_S) -> bool:
    """Ping ``lanes`` until it answers (True) or ``wait_s`` passed (False). An answer proves the link both
    ways: lanes' ``origin.event`` pushes reach control from then on."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            transport.call(lanes, runtime.PING, runtime.Ping(), timeout_s=PING_TIMEOUT_S)
            return True
        except GeodeError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


def tell_lanes_restarted(
    transport: Transport,
    send: Callable[[str, Envelope], None],
    conns: Callable[[], Iterable[Connection]],
    *,
    lanes: str,
    origin: str,
    incarnation: int,
    wait_s: float = LINK_WAIT_S,
    again_after_s: float = 0.1,
) -> int:
    """Push ``cli.notice`` (``lanes_restarted``) to every ready connection attached to a session once the
    new lanes answers, then every ``REPEAT_S`` for ``HELLO_S + again_after_s``. Returns how many were told
    first."""
    linked = lanes_answers(transport, lanes, wait_s)
    at = time.monotonic()
    told = _tell(send, conns(), origin, incarnation)
    log.info(
        "lanes #%d ready (%s): told %d client connections to catch up",
        incarnation,
        "answers" if linked else "no answer yet",
        told,
    )
    until = at + HELLO_S + again_after_s
    while (left := until - time.monotonic()) > 0:  # what lanes pushed before our hello reached it
        time.sleep(min(REPEAT_S, left))
        _tell(send, conns(), origin, incarnation)
    return told


def _tell(send: Callable[[str, Envelope], None], conns: Iterable[Connection], origin: str, inc: int) -> int:
    body = c.Notice(what="lanes_restarted", incarnation=inc).model_dump()
    told = 0
    for k in conns:
        if k.state is ConnState.READY and k.attached:
            send(k.conn_id, Envelope(kind="cast", type=c.CLI_NOTICE, body=body, **{"from": origin}))
            told += 1
    return told
