"""``[messengers]`` of ``config.toml``: platform settings and chat bindings; where bot tokens come from."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationInfo,
    field_validator,
)

from geode.messengers.discord_config import DiscordSettings
from geode.messengers.slack_config import SlackSettings

Platform = Literal["telegram", "slack", "discord"]
PLATFORMS: tuple[Platform, ...] = ("telegram", "slack", "discord")
MAX_TIME_BUDGET_S = 3600.0  # a messenger turn's wall-clock cap (the same bound as delegate_task's)
MAX_POLL_TIMEOUT_S = 50.0  # Telegram's long-poll limit (the Bot API caps `timeout` at 50)
MAX_APPROVAL_TIMEOUT_S = 3600.0

# The environment variables of each platform's credentials; the first one is its bot token.
TOKEN_VARS: dict[str, tuple[str, ...]] = {
    "telegram": ("TELEGRAM_BOT_TOKEN",),
    "slack": ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"),
    "discord": ("DISCORD_BOT_TOKEN",),
}

_TELEGRAM_CHAT = re.compile(r"-?[0-9]{1,20}")  # a user id, or a group/channel id ("-100..."): an integer
_TELEGRAM_THREAD = re.compile(r"[0-9]{1,20}")  # message_thread_id of a forum topic
_SLACK_CHANNEL = re.compile(r"[A-Z0-9]{2,32}")  # C…, G…, D… ids (never the #name)
_SLACK_THREAD = re.compile(r"[0-9]{1,12}\.[0-9]{1,9}")  # the root message's ts
_DISCORD_ID = re.compile(r"[0-9]{1,20}")  # a snowflake
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")


def _id_text(value: object) -> object:
    """TOML integers are accepted for ids (``channel_id = -1001234``) and read as their decimal text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value.strip() if isinstance(value, str) else value


def _id_list(value: object) -> object:
    return [_id_text(v) for v in value] if isinstance(value, list) else value


def _no_blank(values: list[str]) -> list[str]:
    if any(not v for v in values):
        raise ValueError("an empty id is not allowed")
    return values


def _tool_names(values: list[str] | None) -> list[str] | None:
    for name in values or ():
        if not _TOOL_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a tool name")
    return values


def _canonical_int(text: str) -> str:
    return str(int(text))  # "-0100" and "-100" are the same chat


def canonical_channel_id(platform: str, channel_id: str) -> str:
    """The binding's ``channel_id`` checked for ``platform`` and in its one spelling; ``ValueError`` says why.

    Telegram: an integer chat id (negative for groups and channels), or ``chat_id:thread_id`` for a forum
    topic. Slack: a channel id (``C0123ABCD``), or ``channel_id:thread_ts``. Discord: a snowflake, or
    ``channel_id:thread_id``.
    """
    chat, sep, thread = channel_id.partition(":")
    if sep and not thread:
        raise ValueError(f"{channel_id!r}: a topic is written chat_id:thread_id (the thread id is missing)")
    if platform == "telegram":
        if not _TELEGRAM_CHAT.fullmatch(chat):
            raise ValueError(f"{channel_id!r}: a Telegram chat id is an integer, e.g. -1001234567890")
        if thread and not _TELEGRAM_THREAD.fullmatch(thread):
            raise ValueError(f"{channel_id!r}: a Telegram topic is chat_id:thread_id, both integers")
        chat, thread = _canonical_int(chat), _canonical_int(thread) if thread else ""
        if thread == "0":
            raise ValueError(f"{channel_id!r}: thread id 0 is not a topic; bind the chat id alone")
    elif platform == "slack":
        if not _SLACK_CHANNEL.fullmatch(chat):
            raise ValueError(f"{channel_id!r}: a Slack channel id looks like C0123ABCD (not a #name)")
        if thread and not _SLACK_THREAD.fullmatch(thread):
            raise ValueError(f"{channel_id!r}: a Slack thread is channel_id:thread_ts, e.g. C0123:1712.34")
    else:
        if not _DISCORD_ID.fullmatch(chat) or (thread and not _DISCORD_ID.fullmatch(thread)):
            raise ValueError(f"{channel_id!r}: a Discord channel id is a number (a snowflake)")
    return f"{chat}:{thread}" if thread else chat


def canonical_destination(text: str) -> str:
    """A ``send_message`` channel, ``"<platform>:<chat_id>[:<thread_id>]"``, in its one spelling
    (``"telegram:-0100"`` → ``"telegram:-100"``); ``ValueError`` says why it is not one."""
    platform, _, channel = str(text).strip().partition(":")
    if platform not in PLATFORMS or not channel:
        raise ValueError(f"{text!r}: a chat is written platform:chat_id, e.g. telegram:-1001234567890")
    return f"{platform}:{canonical_channel_id(platform, channel)}"


def _destinations(values: list[str]) -> list[str]:
    return [canonical_destination(v) for v in values]


def _absolute(value: str | None) -> str | None:
    """A binding's ``workspace``: an absolute path (``~`` expanded), as a scheduled job's."""
    if value is not None and ("\x00" in value or not os.path.isabs(os.path.expanduser(value))):
        raise ValueError(f"workspace {value!r} is not an absolute path: write one such as ~/chats/team")
    return value


IdText = Annotated[str, BeforeValidator(_id_text)]
IdList = Annotated[list[IdText], BeforeValidator(_id_list), AfterValidator(_no_blank)]


class TelegramSettings(BaseModel):
    """``[messengers.telegram]``: where the Bot API is and how long one getUpdates long poll waits."""

    base_url: str = Field(default="https://api.telegram.org/bot", pattern=r"^https?://\S+$")
    poll_timeout_s: float = Field(default=25.0, ge=0, le=MAX_POLL_TIMEOUT_S)
    enabled: StrictBool = True


class MessengerBinding(BaseModel):
    """``[[messengers.bindings]]``: one chat (or topic) the bot answers in, and who and what it allows there.

    Unknown keys are refused (a misspelt ``allowed_senders`` must never open a chat to everyone)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    platform: Platform
    channel_id: IdText = Field(min_length=1, max_length=128)
    require_mention: StrictBool = False
    allowed_senders: IdList = Field(default_factory=list)  # empty: anyone in the chat
    approvers: IdList = Field(default_factory=list)  # empty: allowed_senders (empty: nobody; deny)
    allowed_tools: Annotated[list[str] | None, AfterValidator(_tool_names)] = None  # None: what DAEMON allows
    time_budget_s: float = Field(default=120.0, gt=0, le=MAX_TIME_BUDGET_S)
    # other bound chats this chat's turns may post to with send_message ("telegram:-100…"); its own always
    send_to: Annotated[list[str], AfterValidator(_destinations)] = Field(default_factory=list)
    # true: this chat's turns are offered schedule_job (each create/cancel asked of its approvers)
    allow_schedule: StrictBool = False
    # where this chat's turns run (absolute, ~ expanded); None: $GEODE_HOME/workspaces/<platform>-<channel>
    workspace: Annotated[str | None, AfterValidator(_absolute)] = Field(
        default=None, min_length=1, max_length=4096
    )
    # Slack: "thread" (each top-level message starts its own session, answered in its thread) or "channel"
    # (top-level messages continue the channel's one session, answered in the channel; a thread keeps its own)
    session: Literal["thread", "channel"] = "thread"
    # an emoji the bot reacts with on each message it takes as a turn ("👀"); "": none (best effort)
    ack_reaction: str = Field(default="", max_length=16, pattern=r"^\S*$")
    # an edited message: "ignore", or "rerun" (a new turn keyed by the edit's version, its own reply)
    on_edit: Literal["ignore", "rerun"] = "ignore"

    @field_validator("channel_id")
    @classmethod
    def _channel_for_platform(cls, value: str, info: ValidationInfo) -> str:
        platform = info.data.get("platform")  # absent when the platform itself was refused
        return canonical_channel_id(platform, value) if platform in PLATFORMS else value

    @field_validator("session")
    @classmethod
    def _session_for_channel(cls, value: str, info: ValidationInfo) -> str:
        platform, channel = info.data.get("platform"), str(info.data.get("channel_id") or "")
        if value == "channel" and platform != "slack":
            raise ValueError(
                'session = "channel" is for Slack bindings (Telegram topics and Discord threads '
                "always have their own sessions)"
            )
        if value == "channel" and ":" in channel:
            raise ValueError(
                'session = "channel" binds a whole channel, not one thread (drop the ":thread_ts")'
            )
        return value

    def __hash__(self) -> int:  # one binding per (platform, channel_id): usable in sets and as a key
        return hash(self.key)

    @property
    def chat_id(self) -> str:
        return self.channel_id.partition(":")[0]

    @property
    def thread_id(self) -> str:
        return self.channel_id.partition(":")[2]

    @property
    def key(self) -> tuple[str, str]:
        return (self.platform, self.channel_id)


def _unique(bindings: list[MessengerBinding]) -> list[MessengerBinding]:
    seen: dict[tuple[str, str], int] = {}
    for i, b in enumerate(bindings):
        if b.key in seen:
            raise ValueError(
                f"bindings[{seen[b.key]}] and bindings[{i}] both bind {b.platform} {b.channel_id!r}"
            )
        seen[b.key] = i
    for i, b in enumerate(bindings):
        for dest in b.send_to:
            platform, _, channel = dest.partition(":")
            if (platform, channel) not in seen:
                raise ValueError(f"bindings[{i}].send_to names {dest!r}, which is not a bound chat")
    return bindings


def _transcription(value: str) -> str:
    """``[messengers] transcription``: "", "openai" or "command:<argv>" (an argv shlex can split)."""
    if value in ("", "openai"):
        return value
    if not value.startswith("command:"):
        raise ValueError(f'{value!r}: transcription is "", "openai" or "command:<argv>"')
    try:
        argv = shlex.split(value.removeprefix("command:"))
    except ValueError as exc:
        raise ValueError(f"{value!r}: the command cannot be split ({exc})") from None
    if not argv:
        raise ValueError(f"{value!r}: name a command after 'command:'")
    return value


DEFAULT_ATTACHMENT_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp", "application/pdf", "text/*")


class MessengersSection(BaseModel):
    """``[messengers]`` (read by the messengers child): platforms, bindings, the approval timeout."""

    telegram: TelegramSettings = TelegramSettings()
    slack: SlackSettings = SlackSettings()
    discord: DiscordSettings = DiscordSettings()
    bindings: Annotated[list[MessengerBinding], AfterValidator(_unique)] = Field(default_factory=list)
    approval_timeout_s: float = Field(default=120.0, gt=0, le=MAX_APPROVAL_TIMEOUT_S)
    # an uncertain reply is looked for in its chat (Slack) this long after it turned uncertain (s)
    observe_grace_s: float = Field(default=60.0, ge=0, le=86400.0)
    # a chat turn running longer than this gets one status message, edited in place (s; 0: none)
    progress_after_s: float = Field(default=5.0, ge=0, le=86400.0)
    # the status message of a chat is edited at most this often (s)
    progress_every_s: float = Field(default=10.0, ge=0.1, le=86400.0)
    # the longest a reply waits before its next attempt (a 429's retry_after, a 5xx, no connection) (s)
    retry_cap_s: float = Field(default=300.0, gt=0, le=86400.0)
    # an inbound file (photo, document) larger than this is refused with a reply and not saved (bytes)
    max_attachment_bytes: int = Field(default=20 * 1024 * 1024, ge=0, le=2 * 1024**3)
    # the media types an inbound file may have ("image/*" matches every image type)
    attachment_types: list[Annotated[str, Field(pattern=r"^[a-z0-9.+-]+/([a-z0-9.+-]+|\*)$")]] = Field(
        default_factory=lambda: list(DEFAULT_ATTACHMENT_TYPES)
    )
    # voice notes: "" (not enabled: answered so), "openai" (the OpenAI transcription API, the openai
    # provider's base URL and key) or "command:<argv>" (run with the saved file's path appended; stdout is it)
    transcription: Annotated[str, AfterValidator(_transcription)] = Field(default="", max_length=4096)
    transcription_model: str = Field(default="whisper-1", min_length=1, max_length=128)
    transcription_timeout_s: float = Field(default=60.0, gt=0, le=3600.0)

    def for_platform(self, platform: str) -> list[MessengerBinding]:
        return [b for b in self.bindings if b.platform == platform]

    def sdk_modules(self) -> list[str]:
        """The translator modules (each imports its platform's SDK) of the platforms enabled with a binding:
        what the zygote imports before it forks, so a restarted messengers child does not import them."""
        bound = {b.platform for b in self.bindings}
        return [f"geode.messengers.{p}" for p in PLATFORMS if p in bound and getattr(self, p).enabled]


def platform_token(
    platform: str,
    *,
    environ: Mapping[str, str],
    dotenv: Mapping[str, str],
    name: str | None = None,
) -> str | None:
    """The bot token of ``platform`` (``TELEGRAM_BOT_TOKEN``...; ``name`` picks another of ``TOKEN_VARS``,
    e.g. ``SLACK_APP_TOKEN``): the environment wins over ``$GEODE_HOME/.env``; blank counts as unset.
    None when neither has it. Never log the result."""
    names = TOKEN_VARS.get(platform, ())
    var = name or (names[0] if names else "")
    if not var or var not in names:
        raise KeyError(f"no token variable {name or ''!r} for platform {platform!r}")
    for source in (environ, dotenv):
        value = (source.get(var) or "").strip()
        if value:
            return value
    return None
