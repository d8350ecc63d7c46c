"""Where a turn's ``send_message`` may post, decided before any approval (DESIGN §6, issue 26 breach 7).

- A chat's turn (DAEMON, origin ``messengers``; the chat read from the turn's own record) posts only to its
  own chat and to the chats its binding lists in ``send_to``.
- A turn nobody can be asked for (DAEMON or HEADLESS without a chat: MCP ``run_agent``, automation, a
  delegated child of a chat turn) posts nowhere: there is no configured delivery chat.
- Any other turn (IPC, REPL: a person is there) is asked, whatever the destination.
- At most ``max_per_turn`` posts per turn (``[tools.send_message]``, default 10); past that, a clear error.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from geode.messengers.config import MessengerBinding, canonical_destination
from geode.protocol.errors import GeodeError
from geode.records.models import TurnRecord
from geode.tools.checks import Request
from geode.tools.policy import is_headless
from geode.tools.settings import SEND_MAX_PER_TURN
from geode.tools.spec import ToolContext

HANDLER = "builtin:send_message"
FILE_HANDLER = "builtin:send_file"
CHAT_ORIGIN = "messengers"  # the peer that submits a bound chat's turns
MAX_TURNS = 4096  # turns whose post counts are kept (oldest forgotten first)


class TurnSource(Protocol):
    def get_turn(self, turn_id: str) -> TurnRecord | None: ...


@dataclass(frozen=True)
class SendVerdict:
    action: Literal["allow", "ask", "deny"]
    message: str = ""
    reason: str = ""  # deny: not_a_chat | other_chat | no_person | turn_unknown | per_turn_cap


def _deny(reason: str, message: str) -> SendVerdict:
    return SendVerdict("deny", message + " Nothing was posted.", reason)


class SendRule:
    """The destination rule and the per-turn cap. Thread-safe; counts live for this executor incarnation."""

    def __init__(
        self,
        bindings: Sequence[MessengerBinding],
        turns: TurnSource | None,
        *,
        max_per_turn: int = SEND_MAX_PER_TURN,
    ) -> None:
        self._send_to = {f"{b.platform}:{b.channel_id}": tuple(b.send_to) for b in bindings}
        self._turns = turns
        self.max_per_turn = max_per_turn
        self._mu = threading.Lock()
        self._posts: OrderedDict[tuple[str, str], set[str]] = OrderedDict()  # (session, turn) → op ids

    def use_bindings(self, bindings: Sequence[MessengerBinding]) -> None:
        """`geode reload`: later sends follow these bindings (the per-turn counts stay)."""
        self._send_to = {f"{b.platform}:{b.channel_id}": tuple(b.send_to) for b in bindings}

    def check(self, ctx: ToolContext, args: Mapping[str, Any]) -> SendVerdict:
        try:
            dest = canonical_destination(str(args.get("channel", "")))
        except ValueError as exc:
            return _deny("not_a_chat", f"send_message: {exc}.")
        verdict = self._where(ctx, dest)
        if verdict.action == "deny":
            return verdict
        return self._count(ctx) or verdict

    def _where(self, ctx: ToolContext, dest: str) -> SendVerdict:
        if ctx.mode == "DAEMON" and ctx.origin == CHAT_ORIGIN:
            try:
                chat = self._chat_of(ctx.turn_id)
            except GeodeError as exc:
                return _deny("turn_unknown", f"Could not tell which chat this turn is from ({exc.message}).")
            if chat:
                allowed = (chat, *self._send_to.get(chat, ()))
                if dest in allowed:
                    return SendVerdict("allow")
                listed = ", ".join(allowed[1:]) or "none"
                return _deny(
                    "other_chat",
                    f"This chat's turn may post only to its own chat ({chat}) and to the chats its binding "
                    f"lists in send_to ({listed}); {dest} is not one of them.",
                )
        if is_headless(ctx.mode):
            return _deny(
                "no_person",
                f"A {ctx.mode} turn without a chat of its own has nobody to approve a post to {dest}, and no "
                "delivery chat is configured.",
            )
        return SendVerdict("ask", f"post to {dest}")

    def _chat_of(self, turn_id: str) -> str:
        return turn_chat(self._turns, turn_id)

    def own_chat(self, ctx: ToolContext) -> str:
        """The chat a chat's DAEMON turn came from (send_file's only destination); "" for any other turn. A
        store error propagates (``GeodeError``)."""
        if ctx.mode != "DAEMON" or ctx.origin != CHAT_ORIGIN:
            return ""
        return self._chat_of(ctx.turn_id)

    def _count(self, ctx: ToolContext) -> SendVerdict | None:
        """None while the turn is under its cap (this call counted once, by its operation id)."""
        key = (ctx.session_id, ctx.turn_id)
        with self._mu:
            ops = self._posts.setdefault(key, set())
            self._posts.move_to_end(key)
            while len(self._posts) > MAX_TURNS:
                self._posts.popitem(last=False)
            if ctx.operation_id in ops:
                return None
            if len(ops) >= self.max_per_turn:
                return _deny(
                    "per_turn_cap",
                    f"This turn already sent {len(ops)} messages, the most one turn may send "
                    "([tools.send_message] max_per_turn).",
                )
            ops.add(ctx.operation_id)
        return None


def turn_chat(turns: TurnSource | None, turn_id: str) -> str:
    """The turn's chat, ``"<platform>:<channel key>"``, from its record (as the messengers child stored it);
    "" when the record says it is not a chat's turn. A store error propagates (``GeodeError``)."""
    record = turns.get_turn(turn_id) if turns is not None else None
    if record is None or record.origin != CHAT_ORIGIN:
        return ""
    origin = record.input.get("messenger") if isinstance(record.input, dict) else None
    if not isinstance(origin, dict):
        return ""
    try:
        return canonical_destination(f"{origin.get('platform', '')}:{origin.get('channel_key', '')}")
    except ValueError:
        return ""


def check_send(rule: SendRule | None, req: Request) -> None:
    """The executor's step for send_message (before the approval): a denial is a tool error recorded on the
    timeline (``send_message_denied``), a destination a person must approve forces the prompt. send_file
    outside a chat's DAEMON turn is refused here too, before anyone is asked (it has no chat to post to)."""
    if req.spec is not None and req.spec.handler == FILE_HANDLER:
        if req.ctx.mode != "DAEMON" or req.ctx.origin != CHAT_ORIGIN:
            why = "send_file posts only to a chat session's own chat; this turn is not one. Nothing posted."
            raise req.deny("policy", why, "tool_policy_denied", reason="not_a_chat")
        return
    if rule is None or req.spec is None or req.spec.handler != HANDLER:
        return
    verdict = rule.check(req.ctx, req.call.input)
    if verdict.action == "deny":
        raise req.deny("policy", verdict.message, "send_message_denied", reason=verdict.reason)
    if verdict.action == "ask":
        req.force_ask = True
