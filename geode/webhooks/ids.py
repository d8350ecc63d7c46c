"""The names of one webhook delivery: its turn id (derived from the route and the delivery id, the same on
every retry and restart, so lanes stores one turn per delivery), the body-hash dedupe key of a route without
a delivery header, and the unguessable per-turn token of its status url."""

from __future__ import annotations

import hashlib
import hmac

TURN_PREFIX = "wh-"
_STATUS_LABEL = b"geode-webhook-status\x00"  # domain separation: the key also derives chat session ids


def delivery_turn_id(route: str, delivery_id: str) -> str:
    """``wh-<route>-<24 hex>``: deterministic in (route, delivery id), at most 92 characters (route names
    are at most 64)."""
    digest = hashlib.sha256(f"{route}\x00{delivery_id}".encode()).hexdigest()[:24]
    return f"{TURN_PREFIX}{route}-{digest}"


def body_key(body: bytes) -> str:
    """The dedupe key of a delivery without a delivery header: ``sha256-<hex of the body>``."""
    return f"sha256-{hashlib.sha256(body).hexdigest()}"


def status_token(key: bytes, turn_id: str) -> str:
    """The status url's token of ``turn_id``: HMAC-SHA256 (hex, 32 characters) keyed by the home's
    session-id key (:func:`geode.home_secrets.session_id_key`)."""
    return hmac.new(key, _STATUS_LABEL + turn_id.encode(), hashlib.sha256).hexdigest()[:32]


def check_status_token(key: bytes, turn_id: str, token: str) -> bool:
    """Whether ``token`` is ``turn_id``'s status token (constant-time)."""
    return hmac.compare_digest(status_token(key, turn_id).encode(), token.encode("utf-8", "replace"))
