"""``[messengers.slack]`` settings: where the Slack Web API is (Socket Mode's URL comes from
``apps.connections.open`` there) and how long one poll waits for an envelope."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_POLL_TIMEOUT_S = 50.0


class SlackSettings(BaseModel):
    """``[messengers.slack]``. Tokens come from ``SLACK_BOT_TOKEN`` (``xoxb-``) and ``SLACK_APP_TOKEN``
    (``xapp-``, Socket Mode), never from this file."""

    model_config = ConfigDict(extra="forbid")
    base_url: str = Field(default="https://slack.com/api/", pattern=r"^https?://\S+$")
    poll_timeout_s: float = Field(default=25.0, ge=0, le=MAX_POLL_TIMEOUT_S)
    connect_timeout_s: float = Field(default=30.0, gt=0, le=300.0)
    enabled: bool = True

    @field_validator("base_url")
    @classmethod
    def _trailing_slash(cls, value: str) -> str:
        """slack_sdk joins method names onto the base URL: without the slash ``.../api`` loses ``api``."""
        return value if value.endswith("/") else value + "/"
