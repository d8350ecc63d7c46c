"""Messages of the control protocol area (see docs/protocol.md)."""

from __future__ import annotations
