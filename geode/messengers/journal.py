"""The poller's durable state in the store's cursors table: the update offset, per-channel positions, each
chat's session generation and last turn, and the journal of submitted turns whose reply is not settled yet.

The journal is a ring of numbered slots: entry ``n`` lives at ``pending#<n mod RING>`` as ``"<n>:<turn id>"``
("" once its reply settled), ``pending.head`` is the next entry, ``pending.tail`` the oldest unsettled one. A
restarted poller reads the entries between tail and head and so knows every turn it still owes a reply; the
ring keeps the table bounded (a full ring refuses new turns until replies settle). Blocking calls (run them
off the event loop).
"""

from __future__ import annotations

import logging

from geode.messengers.ports import StorePort
from geode.protocol.errors import Overloaded

log = logging.getLogger(__name__)
UPDATES = "updates"
HEAD, TAIL = "pending.head", "pending.tail"
RING = 8192  # unsettled replies at most; then the poller waits (the batch is retried) until some settle


def _int(text: str | None) -> int:
    try:
        return max(0, int(text or 0))
    except ValueError:
        return 0


def _slot(entry: int) -> str:
    return f"pending#{entry % RING}"


class PollerState:
    """Durable poller state for one (platform, account)."""

    def __init__(self, store: StorePort, platform: str, account: str) -> None:
        self.store = store
        self.platform = platform
        self.account = account
        self.head = 0
        self.tail = 0
        self.pending: dict[str, int] = {}  # turn id → slot (the last one, if journaled twice)
        self._settled: set[int] = set()  # settled slots in [tail, head)

    # --- raw cursors ----------------------------------------------------------------------------------
    def get(self, channel: str) -> str | None:
        return self.store.get_cursor(self.platform, self.account, channel)

    def put(self, channel: str, position: str) -> None:
        self.store.set_cursor(self.platform, self.account, channel, position)

    # --- the poll cursor (Telegram's update offset) -----------------------------------------------------
    def cursor(self) -> str | None:
        return self.get(UPDATES) or None

    def set_cursor(self, position: str) -> None:
        self.put(UPDATES, position)

    def offset(self) -> int | None:
        pos = self.get(UPDATES)
        return _int(pos) if pos else None

    def set_offset(self, offset: int) -> None:
        self.put(UPDATES, str(offset))

    # --- per-channel positions (Discord: the newest message id handled; history is read after it) ------
    def position(self, channel: str) -> str | None:
        return self.get(f"after:{channel}") or None

    def set_position(self, channel: str, position: str) -> None:
        self.put(f"after:{channel}", position)

    # --- sessions -------------------------------------------------------------------------------------
    def generation(self, channel_key: str) -> int:
        return _int((self.get(f"session:{channel_key}") or "0").partition(":")[0])

    def new_generation(self, channel_key: str, message_id: str) -> int:
        """Start a fresh session for the chat (``/new``). Idempotent per message: a redelivered ``/new``
        does not skip a generation."""
        raw = self.get(f"session:{channel_key}") or "0"
        gen_text, _, by = raw.partition(":")
        gen = _int(gen_text)
        if by == message_id:
            return gen
        self.put(f"session:{channel_key}", f"{gen + 1}:{message_id}")
        return gen + 1

    def last_turn(self, channel_key: str) -> str:
        return self.get(f"last:{channel_key}") or ""

    def set_last_turn(self, channel_key: str, turn_id: str) -> None:
        self.put(f"last:{channel_key}", turn_id)

    # --- the pending-reply journal --------------------------------------------------------------------
    def load(self) -> list[str]:
        """Read the unsettled turns (oldest first) after a start."""
        self.tail, self.head = _int(self.get(TAIL)), _int(self.get(HEAD))
        self.pending.clear()
        self._settled.clear()
        for slot in range(self.tail, self.head):
            seq, _, turn_id = (self.get(_slot(slot)) or "").partition(":")
            if turn_id and seq == str(slot):
                self.pending[turn_id] = slot
            else:
                self._settled.add(slot)
        self._advance()
        return list(self.pending)

    def add(self, turn_id: str) -> None:
        """Journal a submitted turn (the slot first, then the head: a slot past the head is reused)."""
        if turn_id in self.pending:
            return
        slot = self.head
        if slot - self.tail >= RING:
            raise Overloaded(f"{RING} replies are still owed; new turns wait until some are delivered")
        self.put(_slot(slot), f"{slot}:{turn_id}")
        self.put(HEAD, str(slot + 1))
        self.head = slot + 1
        self.pending[turn_id] = slot

    def settle(self, turn_id: str) -> None:
        """The turn's reply is settled (posted, replayed, uncertain or given up): forget it durably."""
        slot = self.pending.pop(turn_id, None)
        if slot is None:
            return
        self.put(_slot(slot), "")
        self._settled.add(slot)
        self._advance()

    def _advance(self) -> None:
        tail = self.tail
        while tail in self._settled:
            self._settled.discard(tail)
            tail += 1
        if tail != self.tail:
            self.put(TAIL, str(tail))
            self.tail = tail
