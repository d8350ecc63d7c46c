"""``[messengers.discord]`` settings: where Discord's REST API and gateway are (discord.py is pointed there by
``geode.messengers.discord.point_at``) and how long one poll waits for an event."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

DEFAULT_BASE_URL = "https://discord.com/api/v10"
DEFAULT_GATEWAY_URL = "wss://gateway.discord.gg/"
MAX_POLL_TIMEOUT_S = 50.0
DEFAULT_BACKFILL_MAX_AGE_S = 86_400.0


class DiscordSettings(BaseModel):
    """``[messengers.discord]``. The bot token comes from ``DISCORD_BOT_TOKEN``, never from this file; the
    bot needs the MESSAGE_CONTENT privileged intent enabled in the developer portal."""

    model_config = ConfigDict(extra="forbid")
    base_url: str = Field(default=DEFAULT_BASE_URL, pattern=r"^https?://\S+$")  # REST, up to /api/v10
    gateway_url: str = Field(default=DEFAULT_GATEWAY_URL, pattern=r"^wss?://\S+$")
    poll_timeout_s: float = Field(default=25.0, ge=0, le=MAX_POLL_TIMEOUT_S)
    connect_timeout_s: float = Field(default=30.0, gt=0, le=300.0)
    # after a new gateway session, bound channels are read back this far at most (0: not read back)
    backfill_max_age_s: float = Field(default=DEFAULT_BACKFILL_MAX_AGE_S, ge=0, le=14 * 86_400.0)
    enabled: StrictBool = True

    @field_validator("base_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        """discord.py appends ``/users/@me`` etc. to the base: a trailing slash would double it."""
        return value.rstrip("/")
