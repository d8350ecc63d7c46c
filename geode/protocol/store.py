"""Messages of the store protocol area (see docs/protocol.md)."""

from __future__ import annotations
