"""A peer died: fail this process's requests in flight to it at once instead of letting each wait out its call
timeout. The supervisor publishes ``child_exited`` the moment it reaps a child; no reply can come after it.

Only for targets whose callers retry safely: every store call goes through ``StoreClient``, which retries an
``unavailable`` like a timeout and whose writes carry their idempotency key, so a failed call is re-sent to
the next incarnation exactly as after its timeout, only seconds sooner (DESIGN.md §5 is unchanged). Calls to
lanes fail fast only in loop workers (``worker.ready``, ``turn.done``: idempotent, retried until acknowledged)
and control (``lanes.submit`` is idempotent by turn id and retried; a replay or cancel is asked again by the
client); the executor's ``lanes.approval`` keeps its own deadline. The scheduler's calls to lanes and the
executor fail fast too: ``lanes.submit`` is idempotent by the occurrence's turn id, and a failed
``messenger.deliver`` is retried under the same reply operation id, which the receipt admits once (a post in
doubt stays uncertain); a call left to its 90 s deadline would hold every job's tick. The webhooks child's
calls to them fail fast for the same reasons (an intake's turn id, its ``reply-<turn_id>`` operation id).
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from geode.protocol import lifecycle
from geode.protocol.errors import GeodeError, Unavailable

log = logging.getLogger(__name__)
RETRY_SAFE = ("store",)  # every child: its callers retry (StoreClient)
LANES_RETRY_SAFE = ("control", "loop-*")  # children whose every call to lanes is retried
SCHEDULER_RETRY_SAFE = ("lanes", "executor")  # the scheduler (and webhooks) retries every call under one id


def targets_for(who: str) -> tuple[str, ...]:
    """The peers whose exit fails this child's calls in flight to them at once."""
    if who in ("scheduler", "webhooks"):
        return (*RETRY_SAFE, *SCHEDULER_RETRY_SAFE)
    lanes = any(fnmatch.fnmatchcase(who, pattern) for pattern in LANES_RETRY_SAFE)
    return (*RETRY_SAFE, "lanes") if lanes else RETRY_SAFE


class PeerExited(Unavailable):
    """The target exited with this request in flight: no reply will come (retryable like a timeout)."""


def on_exit_failer(
    bus: Any, targets: Iterable[str], who: str, *, error: type[Unavailable] = PeerExited
) -> Callable[[str, Mapping[str, Any]], None]:
    """A ``supervisor`` event handler: on ``child_exited`` of one of ``targets``, fail what is in flight with
    ``error`` (a caller that must not retry blindly gets its own type, e.g. the executor's posts in flight to
    the messengers child: ``MessengersLost`` leaves their receipts uncertain)."""
    names = frozenset(targets)

    def on_event(topic: str, event: lifecycle.ChildEvent) -> None:
        name = event.name
        if topic != lifecycle.CHILD_EXITED or name not in names or name == who:
            return
        dead = f"{name}#{event.incarnation}"
        err = error(f"{dead} exited ({event.reason or 'unknown'}) with this request in flight")
        try:
            n = bus.fail_pending(name, err)
        except GeodeError as exc:  # our bus is stopping
            log.info("could not fail the calls in flight to %s: %s", dead, exc)
            return
        if n:
            log.info("%s exited: %d call(s) in flight to it failed at once (%s)", dead, n, error.__name__)

    return lifecycle.on_child_events(on_event)  # the body validated as a ChildEvent first


def fail_calls_on_exit(bus: Any, who: str, targets: Iterable[str] | None = None) -> None:
    """Subscribe ``bus`` to the supervisor's lifecycle events for ``targets`` (``who``: this child)."""
    bus.subscribe("supervisor", on_exit_failer(bus, targets_for(who) if targets is None else targets, who))
