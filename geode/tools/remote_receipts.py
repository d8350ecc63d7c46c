"""After main's executor starts: receipts a remote executor left ``admitted`` under an incarnation that is not
registered once the liveness window has passed become ``uncertain``, with why (a main restart forgot it).

A remote executor that main does not know answers ``known: false`` to its heartbeat and leaves, so an
incarnation absent after the window never commits again; one main still knows (its table kept in the run
dir) carries on and settles its own receipts, or is declared lost by the routing like any lost host."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from geode.protocol.errors import GeodeError
from geode.records.models import Receipt, ReceiptState

log = logging.getLogger(__name__)
SCAN_LIMIT = 2000  # the newest receipts looked at (the store's list bound)


class ReceiptRecords(Protocol):
    def list_receipts(
        self, *, session_id: str | None = None, uncertain_only: bool = False, limit: int = 200
    ) -> list[Receipt]: ...

    def mark_uncertain(self, operation_id: str, reason: str) -> None: ...


def remote_owner(owner: str) -> tuple[str, int] | None:
    """``HOST/executor#N`` → (``HOST/executor``, N); None for a local owner (``executor#N``) or a bad one."""
    name, _, inc = owner.rpartition("#")
    if "/" not in name or not inc.isdigit():
        return None
    return name, int(inc)


def settle_forgotten(records: ReceiptRecords, is_live: Callable[[str, int], bool]) -> list[str]:
    """Mark every ``admitted`` receipt of a remote owner incarnation that is not live ``uncertain``; returns
    their operation ids. ``mark_uncertain`` leaves a receipt that settled meanwhile as it is."""
    marked: list[str] = []
    for r in records.list_receipts(limit=SCAN_LIMIT):
        owner = remote_owner(r.owner) if r.state == ReceiptState.ADMITTED else None
        if owner is None or is_live(*owner):
            continue
        why = (
            f"main restarted and {r.owner} did not register again: the effect may have run on that host "
            "(check it there, then geode reconcile)"
        )
        records.mark_uncertain(r.operation_id, why)
        marked.append(r.operation_id)
    if marked:
        log.warning("%d receipt(s) of remote executors main no longer knows are now uncertain", len(marked))
    return marked


def settle_after(
    records: ReceiptRecords,
    is_live: Callable[[str, int], bool],
    wait_s: float,
    stop: threading.Event,
) -> threading.Thread:
    """Run :func:`settle_forgotten` once, ``wait_s`` after now, on its own thread; retried while the store
    does not answer (it may still be starting)."""

    def run() -> None:
        if stop.wait(wait_s):
            return
        backoff = 0.25
        while not stop.is_set():
            try:
                settle_forgotten(records, is_live)
                return
            except GeodeError as exc:
                log.info("remote receipts not swept yet: %s; retrying", exc)
            stop.wait(backoff)
            backoff = min(5.0, backoff * 2)

    t = threading.Thread(target=run, name="remote-receipts", daemon=True)
    t.start()
    return t
