"""``[metrics]`` of ``config.toml``: where the supervisor serves the Prometheus page (``listen``, off when "")
and the NAME of the ``$GEODE_HOME/.env`` key whose value a scraper must send as a bearer token.

A leaf: pydantic only. A literal token is refused (secrets live in .env) and never shown."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from geode.listen_address import parse_listen as parse_address

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
SECRETS_HINT = 'secrets live in $GEODE_HOME/.env; name the key in token_env = "NAME"'


class MetricsSection(BaseModel):
    """The metrics page: on when ``listen`` is set (``geode serve`` only, served by the supervisor)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    listen: str = ""  # "127.0.0.1:9464" serves GET /metrics there; "" = off (prometheus_client not imported)
    token_env: str = ""  # the NAME of a .env key: a scrape must send "Authorization: Bearer <its value>"

    @model_validator(mode="before")
    @classmethod
    def _no_literal(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and ("token" in data or "bearer_token" in data):
            raise ValueError(f"a literal token is refused: {SECRETS_HINT}")
        return data

    @field_validator("listen")
    @classmethod
    def _listen(cls, listen: str) -> str:
        if listen:
            parse_listen(listen)
        return listen

    @field_validator("token_env")
    @classmethod
    def _token_env(cls, name: str) -> str:
        if name and not _ENV_NAME.fullmatch(name):
            raise ValueError(f"token_env is not an environment variable name: {SECRETS_HINT}")
        return name


def parse_listen(listen: str) -> tuple[str, int]:
    """``"host:port"`` (``"[::1]:9464"`` for IPv6) as ``(host, port)``; ``ValueError`` in one line."""
    return parse_address(listen, 9464)
