"""The chaos run's chat: the real python-telegram-bot in the messengers child, polling a local Bot API server
bound to a few chats. A chat user posts ``chaos-turn-chat<N>-<n>`` (one message in flight per chat, the next
once the bot replied or the wait ran out); the model answers ``replied <tag>``. The checker counts the bot's
replies to each message: never two, and none only where the reply's receipt is ``uncertain`` (the operator
sees it) — "no Slack reply is posted twice" and "nothing that never began is lost", for chats."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from actors.cli.messengers_view import messengers_detail
from geode.home import GeodeHome
from geode.messengers.sessions import reply_operation_id, turn_id_for
from geode.protocol.errors import GeodeError
from geode.records.models import Receipt
from geode.testing.bot_api_server import LocalBotApi

SENDER = 1001
REPLIED = re.compile(r"replied (chat\d+-\d+)")
FIRST_CHAT = -100900  # chat i is FIRST_CHAT - i


@dataclass
class ChatMessage:
    """One user message and what the chat showed for it."""

    tag: str
    chat: int
    message_id: int
    update_id: int
    t_sent: float
    t_reply: float = 0.0  # the first reply seen (0: none yet)
    text: str = ""  # that reply's text

    @property
    def turn_id(self) -> str:
        return turn_id_for("telegram", str(self.chat), str(self.message_id))

    @property
    def reply_op(self) -> str:
        return reply_operation_id(self.turn_id)


@dataclass
class ChatRecord:
    messages: list[ChatMessage] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def chat_ids(n: int) -> list[int]:
    return [FIRST_CHAT - i for i in range(n)]


def chat_config(api: LocalBotApi, chats: list[int]) -> str:
    """``[messengers.telegram]`` at the local server and one binding per chat (text answers: no tool, so no
    approval is asked in the chat)."""
    out = f'[messengers.telegram]\nbase_url = "{api.base_url}"\npoll_timeout_s = 1\n'
    for chat in chats:
        out += (
            f'[[messengers.bindings]]\nplatform = "telegram"\nchannel_id = "{chat}"\n'
            f'allowed_senders = ["{SENDER}"]\n'
        )
    return out


def chat_loop(
    api: LocalBotApi, chats: list[int], rec: ChatRecord, stop: threading.Event, timeout_s: float
) -> None:
    """Post a tagged message in each chat, the next once the bot replied to it (or ``timeout_s`` passed: its
    reply may be ``uncertain``, never posted); replies are matched by ``reply_to``."""
    seen = dict.fromkeys(chats, 0)  # posts of each chat already read
    waiting: dict[int, ChatMessage] = {}
    numbers = dict.fromkeys(chats, 0)
    while not stop.is_set():
        now = time.monotonic()
        for i, chat in enumerate(chats):
            new = api.posts(chat, start=seen[chat])
            seen[chat] += len(new)
            msg = waiting.get(chat)
            for post in new:
                if msg is not None and post["reply_to"] == msg.message_id and not msg.t_reply:
                    msg.t_reply, msg.text = now, post["text"]
            if msg is not None and not msg.t_reply and now - msg.t_sent < timeout_s:
                continue
            numbers[chat] += 1
            tag = f"chat{i + 1}-{numbers[chat]}"
            upd = api.push_message(chat, f"chaos-turn-{tag}", sender_id=SENDER)
            sent = ChatMessage(tag, chat, upd["message"]["message_id"], upd["update_id"], time.monotonic())
            waiting[chat] = sent
            with rec.lock:
                rec.messages.append(sent)
        stop.wait(0.1)


def settle_replies(home: GeodeHome, rec: ChatRecord, timeout_s: float) -> str:
    """Wait (bounded) until the Telegram poller has read past the last message and owes no reply; '' when
    it has, else why not."""
    last = max((m.update_id for m in rec.messages), default=0)
    deadline = time.monotonic() + timeout_s
    why = "not asked"
    while time.monotonic() < deadline:
        try:
            detail = messengers_detail(home)
        except GeodeError as exc:
            detail, why = None, f"messengers: {exc}"
        poller = next((p for p in (detail or {}).get("platforms", []) if p["platform"] == "telegram"), None)
        if poller is not None:
            if (poller.get("cursor") or 0) > last and poller.get("pending_replies") == 0:
                return ""
            why = f"cursor {poller.get('cursor')} (last update {last}), {poller.get('pending_replies')} owed"
        time.sleep(0.2)
    return why


@dataclass
class ChatVerdict:
    messages: int = 0
    replied: int = 0
    uncertain: int = 0  # no post, the reply receipt uncertain: waits for the operator
    otherwise: int = 0  # replied once, with another answer than ``replied <tag>`` (e.g. a paused session's)
    duplicate: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    misdirected: list[str] = field(default_factory=list)  # the reply names another message's tag
    unsettled: str = ""

    def line(self) -> str:
        return (
            f"chat: {self.messages} messages, {self.replied} replied once ({self.otherwise} otherwise), "
            f"{self.uncertain} reply uncertain (not posted), {len(self.duplicate)} dup posts, "
            f"{len(self.lost)} lost, {len(self.misdirected)} misdirected"
            + (f"; not settled: {self.unsettled}" if self.unsettled else "")
        )


def check_chat(api: LocalBotApi, rec: ChatRecord, uncertain: list[Receipt], unsettled: str) -> ChatVerdict:
    """Every message's replies: more than one is a duplicate post; none is lost unless its reply receipt is
    uncertain (a post that may or may not have happened, shown to the operator, never re-sent)."""
    v = ChatVerdict(messages=len(rec.messages), unsettled=unsettled)
    uncertain_ops = {r.operation_id for r in uncertain}
    replies: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for chat in {m.chat for m in rec.messages}:
        for post in api.posts(chat):
            replies.setdefault((chat, post["reply_to"]), []).append(post)
    for m in rec.messages:
        posts = replies.get((m.chat, m.message_id), [])
        if len(posts) > 1:
            v.duplicate.append(f"{m.tag} ({m.turn_id}): {len(posts)} posts {[p['text'][:40] for p in posts]}")
        elif posts:
            v.replied += 1
            text = posts[0]["text"]
            named = REPLIED.search(text)
            if named is not None and named.group(1) != m.tag:
                v.misdirected.append(f"{m.tag} ({m.turn_id}): answered {text[:60]!r}")
            elif named is None:
                v.otherwise += 1
        elif m.reply_op in uncertain_ops:
            v.uncertain += 1
        else:
            v.lost.append(f"{m.tag} ({m.turn_id}): no reply and no uncertain receipt")
    return v
