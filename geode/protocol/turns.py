"""Messages of the turns protocol area (see docs/protocol.md)."""

from __future__ import annotations
