"""``[bus]`` (and ``[bus.curve]``): the per-process bus's section and its defaults, a shell leaf."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

BUS_WORKERS = 4  # handler threads per served endpoint without its own count


class CurveSection(BaseModel):
    """``[bus.curve]``: ``authorized_keys`` (worker hosts' public keys) may connect over tcp; this host's
    own pair is read from ``$GEODE_HOME/keys/`` (``geode keys init``), which wins over the older inline
    ``public_key`` / ``secret_key``."""

    model_config = ConfigDict(extra="forbid")
    public_key: str = ""
    secret_key: str = ""
    allowed_clients: list[str] = Field(default_factory=list)
    authorized_keys: list[str] = Field(default_factory=list)


class BusSection(BaseModel):
    """``[bus]`` (read by ``actors/bus/endpoints.py``)."""

    workers: int = Field(default=BUS_WORKERS, ge=1)
    listen: str = ""  # "tcp://0.0.0.0:7700": lanes, store, executor also bind port, port+1, port+2 (CURVE)
    tcp: dict[str, str] = Field(default_factory=dict)
    curve: CurveSection = CurveSection()
