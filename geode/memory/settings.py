"""``[memory]``: the cap on each MEMORY.md file (the leaf the memory files, the prompt and doctor read)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MAX_BYTES = 25_000  # one MEMORY.md's cap: memory_save refuses past it, the prompt loads at most this much
MAX_BYTES_CEILING = 1_000_000


class MemorySection(BaseModel):
    """``[memory]``: ``max_bytes``, each MEMORY.md's cap (UTF-8 bytes)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    max_bytes: int = Field(default=MAX_BYTES, ge=1_000, le=MAX_BYTES_CEILING)
