"""Messages of the tools protocol area (see docs/protocol.md)."""

from __future__ import annotations
