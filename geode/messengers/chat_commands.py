"""A bound chat's own commands (``bindings.Command``), answered by the poller without the model: ``/new`` (a
fresh session for the chat), ``/status`` (the session and its last turn) and ``/memory`` (the chat's
MEMORY.md as its sessions load it) get one receipted reply each; ``/compact`` is a turn of its own
(``compact_now``: geode.loop.compact_now), submitted by the poller like any message, whose answer says what
the compaction did."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from geode.memory.files import load
from geode.memory.scopes import chat_scope, memory_paths
from geode.memory.settings import MAX_BYTES
from geode.messengers.config import MessengerBinding
from geode.messengers.journal import PollerState
from geode.messengers.model import InboundMessage
from geode.messengers.sessions import reply_operation_id, session_id_for, turn_id_for
from geode.messengers.workspaces import chat_dir_name
from geode.protocol import messengers as messengers_msg

REPLY_MAX = 60_000  # a DeliverReply's text is at most 64 KiB; the platform's limit splits it further
NO_MEMORY = "No memory yet in this chat (the agent keeps notes here with memory_save)."


class Poller(Protocol):
    """What the commands use of the poller (:class:`geode.messengers.poller.Poller`)."""

    platform: str
    settings: Any  # PollerSettings: its session_key
    status: Any  # PollerStatus: messages_in
    store: Any  # StorePort: get_turn
    out: Any  # Outbox: state, spawn, command_reply
    memory: ChatMemory | None


@dataclass(frozen=True)
class ChatMemory:
    """Where the chats' memory lives (``$GEODE_HOME/memory/chats/<key>/MEMORY.md``) and its cap."""

    home_root: Path
    max_bytes: int = MAX_BYTES

    def text(self, binding: MessengerBinding) -> str:
        """The ``/memory`` answer: the chat's MEMORY.md as its sessions load it (cut at the cap, said so)."""
        path = memory_paths(chat_scope(chat_dir_name(binding)), self.home_root)[0]
        loaded = load(path, self.max_bytes)
        if loaded is None or not loaded.text.strip():
            return NO_MEMORY
        note = ", past the cap: sessions load only its beginning" if loaded.truncated else ""
        body = loaded.text.strip()
        if len(body) > REPLY_MAX:
            body = body[:REPLY_MAX] + "\n[… cut for the chat]"
        return f"Memory of this chat ({loaded.size} of {self.max_bytes} bytes{note}):\n\n{body}"


async def answer(poller: Poller, msg: InboundMessage, name: str, binding: MessengerBinding) -> None:
    """Reply to ``/new``, ``/status`` or ``/memory`` (once, receipted: the reply's operation id is the
    message's turn id's)."""
    state = poller.out.state
    assert state is not None
    key = msg.channel_key
    if name == "new":
        gen = await asyncio.to_thread(state.new_generation, key, msg.message_id)
        sid = session_id_for(poller.platform, key, gen, poller.settings.session_key)
        text = f"Started a new session: {sid}"
    else:
        gen = await asyncio.to_thread(state.generation, key)
        sid = session_id_for(poller.platform, key, gen, poller.settings.session_key)
        if name == "memory":
            memory = poller.memory
            text = (
                await asyncio.to_thread(memory.text, binding) if memory else "Memory is not available here."
            )
        else:
            text = f"Session: {sid}\n{await _last_turn_line(poller, state, key)}"
    poller.status.messages_in += 1
    turn_id = turn_id_for(poller.platform, key, msg.message_id)
    req = messengers_msg.DeliverReply(
        operation_id=reply_operation_id(turn_id),
        session_id=sid,
        turn_id=turn_id,
        channel=f"{poller.platform}:{key}",
        text=text,
        reply_to=msg.message_id,
    )
    poller.out.spawn(poller.out.command_reply(req))


async def _last_turn_line(poller: Poller, state: PollerState, key: str) -> str:
    last = await asyncio.to_thread(state.last_turn, key)
    rec = await asyncio.to_thread(poller.store.get_turn, last) if last else None
    if rec is None:
        return "Last turn: none yet."
    reason = (rec.outcome or {}).get("termination_reason", "")
    return f"Last turn: {rec.state.value}" + (f" ({reason})" if reason else "") + f" [{rec.session_id}]"
