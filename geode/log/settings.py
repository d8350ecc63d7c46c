"""``[log]``: every process's log level (read by ``actors/tree/process_logging.py``), a leaf section."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator

Level = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
LOG_LEVEL: Level = "INFO"


def _upper(value: object) -> object:
    return value.upper() if isinstance(value, str) else value


class LogSection(BaseModel):
    """``[log]`` (case-insensitive level)."""

    level: Annotated[Level, BeforeValidator(_upper)] = LOG_LEVEL
