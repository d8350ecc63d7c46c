"""Which chats the bot answers in: a binding lookup and the verdict on each inbound message (ignore, command,
turn), with the bot's @mention stripped."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from geode.messengers.config import MessengerBinding
from geode.messengers.model import InboundMessage, channel_key_of

IgnoreReason = Literal["unbound", "sender", "bot", "edited", "no_mention", "empty"]
CommandName = Literal["new", "status", "compact", "memory"]
COMMANDS: tuple[CommandName, ...] = ("new", "status", "compact", "memory")
# "/new", "/status", "/compact", "/memory", "/new@botname", then whitespace or the end (arguments are ignored)
_COMMAND = re.compile(r"^/(?P<name>[A-Za-z0-9_]{1,32})(?:@(?P<bot>[A-Za-z0-9_]{1,64}))?(?:\s|$)")


@dataclass(frozen=True)
class Ignore:
    """Drop the message (counted by ``reason`` in the poller's status)."""

    reason: IgnoreReason


@dataclass(frozen=True)
class Command:
    """A chat command for GEODE itself: ``/new`` (a fresh session for this chat), ``/status``, ``/compact``
    (summarize the session now) or ``/memory`` (show the chat's memory); geode/messengers/chat_commands.py."""

    name: CommandName
    binding: MessengerBinding


@dataclass(frozen=True)
class Turn:
    """Run a turn on ``text`` (the message with the bot's @mention stripped)."""

    text: str
    binding: MessengerBinding


Verdict = Ignore | Command | Turn


def _canonical(platform: str, chat_id: str) -> str:
    """Telegram ids are integers: ``"-0100"`` finds the binding of ``-100``."""
    if platform == "telegram":
        try:
            return str(int(chat_id))
        except ValueError:
            return chat_id
    return chat_id


def _mention(bot_username: str) -> re.Pattern[str] | None:
    name = bot_username.strip().lstrip("@")
    if not name:
        return None
    return re.compile(rf"(?<![\w@])@{re.escape(name)}(?![\w])", re.IGNORECASE)


def strip_mention(text: str, bot_username: str) -> str:
    """``text`` without the bot's ``@username`` (any case): a leading address (``"@bot, do x"``) goes with
    its punctuation (also at the start of a line), elsewhere the mention and one space before it go; other
    mentions are kept."""
    pattern = _mention(bot_username)
    if pattern is None:
        return text.strip()
    text = re.sub(rf"^\s*{pattern.pattern}[\s,:;]*", "", text, count=1, flags=re.IGNORECASE)
    text = re.sub(rf"(?m)^([ \t]*){pattern.pattern}[ \t,:;]*", r"\1", text, flags=re.IGNORECASE)
    text = re.sub(rf"[ \t]?{pattern.pattern}", "", text, flags=re.IGNORECASE)
    return text.strip()


def _strip_leading_mention(text: str, bot_username: str) -> str:
    """``text`` without a leading ``@<bot>`` (and the punctuation after it); unchanged without one."""
    pattern = _mention(bot_username)
    if pattern is None:
        return text
    return re.sub(rf"^\s*{pattern.pattern}[\s,:;]*", "", text, count=1, flags=re.IGNORECASE)


def mentions(text: str, bot_username: str) -> bool:
    pattern = _mention(bot_username)
    return pattern is not None and pattern.search(text) is not None


class Bindings:
    """The configured bindings of every platform, looked up by (platform, chat, thread)."""

    def __init__(self, bindings: Sequence[MessengerBinding]) -> None:
        self._all = tuple(bindings)
        self._by_key: dict[tuple[str, str], MessengerBinding] = {b.key: b for b in self._all}

    def __iter__(self) -> Iterator[MessengerBinding]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)

    def for_platform(self, platform: str) -> list[MessengerBinding]:
        return [b for b in self._all if b.platform == platform]

    def find(self, platform: str, chat_id: str, thread_id: str = "") -> MessengerBinding | None:
        """The binding of a topic (``chat:thread``) if there is one, else the binding of its chat."""
        chat = _canonical(platform, chat_id)
        if thread_id:
            topic = self._by_key.get((platform, channel_key_of(chat, _canonical(platform, thread_id))))
            if topic is not None:
                return topic
        return self._by_key.get((platform, chat))

    def find_channel(self, platform: str, channel_key: str) -> MessengerBinding | None:
        """:meth:`find` for a ``"<chat_id>[:<thread_id>]"`` key (e.g. a ``send_message`` channel)."""
        chat, _, thread = channel_key.partition(":")
        return self.find(platform, chat, thread) if chat else None

    def classify(self, msg: InboundMessage, *, bot_username: str) -> Verdict:
        """What to do with one inbound message. Checks, in order: a binding for its chat or topic; not from
        a bot (this one or another); not an edit (unless the binding's ``on_edit = "rerun"``); an allowed
        sender; a GEODE command (``/new``, ``/status``, ``/compact``, ``/memory``, also ``/new@<this bot>``
        and ``@<this bot> /new``; addressed to another bot → ignored); the mention the binding requires; some
        text left once the bot's mention is stripped."""
        binding = self.find(msg.platform, msg.chat_id, msg.thread_id)
        if binding is None:
            return Ignore("unbound")
        if msg.from_bot:
            return Ignore("bot")
        if msg.edited and binding.on_edit != "rerun":
            return Ignore("edited")
        if binding.allowed_senders and msg.sender_id not in binding.allowed_senders:
            return Ignore("sender")
        text = msg.text.strip()
        # "@bot /new": Slack takes a leading "/" as its own slash command, so a command may follow the mention
        command = _COMMAND.match(text) or _COMMAND.match(_strip_leading_mention(text, bot_username))
        if command is not None:
            addressee = command.group("bot")
            me = bot_username.strip().lstrip("@")
            if addressee and addressee.lower() != me.lower():
                return Ignore("no_mention")  # "/new@otherbot": another bot's command
            name = command.group("name").lower()
            if name in COMMANDS:
                return Command(name, binding)  # type: ignore[arg-type]  # checked against COMMANDS
            if addressee:  # "/start@thisbot": addressed to us, so no further mention is needed
                text = text.replace(f"@{addressee}", "", 1)
                return _turn(text, binding, bot_username)
        if binding.require_mention and not (msg.mentioned or mentions(text, bot_username)):
            return Ignore("no_mention")
        return _turn(text, binding, bot_username, files=bool(msg.attachments))

    @staticmethod
    def may_approve(binding: MessengerBinding, sender_id: str) -> bool:
        """Whether ``sender_id`` may answer an approval in ``binding``'s chat: the binding's approvers if it
        names any, else its allowed senders. A binding that names neither has no approver (DESIGN §6: none →
        deny): its tools that need approval are denied without asking the chat."""
        if binding.approvers:
            return sender_id in binding.approvers
        return sender_id in binding.allowed_senders

    @staticmethod
    def has_approvers(binding: MessengerBinding) -> bool:
        """Whether anyone can answer an approval in ``binding``'s chat (``may_approve`` for some sender)."""
        return bool(binding.approvers or binding.allowed_senders)


def _turn(text: str, binding: MessengerBinding, bot_username: str, *, files: bool = False) -> Verdict:
    stripped = strip_mention(text, bot_username)
    return Turn(stripped, binding) if stripped or files else Ignore("empty")  # a photo needs no caption
