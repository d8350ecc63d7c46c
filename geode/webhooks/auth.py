"""Who may post to a route: the sender's signature (GitHub, Stripe, Slack) or bearer token, checked against
each of the route's 1 or 2 secrets (two during a rotation) in constant time, and a signed timestamp within
the route's ``tolerance_s`` of ``now`` (Stripe, Slack: a captured request cannot be replayed later).

:func:`verify` never raises on a request's bytes: its :class:`AuthResult` says ``ok`` or why not
(``missing``, ``malformed``, ``bad_signature``, ``stale``). :func:`route_secrets` reads the secrets by their
names from ``$GEODE_HOME/.env``; a missing one is a one-line ``ConfigError`` naming the key, never a value.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from geode.protocol.errors import ConfigError
from geode.webhooks.settings import RouteSpec

Reason = Literal["", "missing", "malformed", "bad_signature", "stale"]
GITHUB_HEADER = "X-Hub-Signature-256"
STRIPE_HEADER = "Stripe-Signature"
SLACK_SIGNATURE = "X-Slack-Signature"
SLACK_TIMESTAMP = "X-Slack-Request-Timestamp"
BEARER_HEADER = "Authorization"
_HEX = re.compile(r"^[0-9a-fA-F]{64}$")
_TS = re.compile(r"^[0-9]{1,12}$")


@dataclass(frozen=True)
class AuthResult:
    """The outcome of one check: ``reason`` is "" when ``ok``."""

    ok: bool
    reason: Reason = ""


OK = AuthResult(True)


def header(headers: Mapping[str, str], name: str) -> str | None:
    """``name``'s value, the header name matched case-insensitively (a plain dict or a multidict)."""
    got = headers.get(name)
    if got is not None:
        return got
    low = name.lower()
    return next((v for k, v in headers.items() if k.lower() == low), None)


def verify(
    route: RouteSpec, secrets: list[bytes], headers: Mapping[str, str], body: bytes, now: float
) -> AuthResult:
    """Whether the request (``headers``, the raw ``body``) was sent by who holds one of ``secrets``, per the
    route's ``auth`` scheme; ``now`` is the wall clock (seconds since the epoch) signed timestamps are
    compared with."""
    if not secrets:
        return AuthResult(False, "missing")
    if route.auth == "github":
        return _github(secrets, header(headers, GITHUB_HEADER), body)
    if route.auth == "stripe":
        return _stripe(secrets, header(headers, STRIPE_HEADER), body, now, route.tolerance_s)
    if route.auth == "slack":
        ts, sig = header(headers, SLACK_TIMESTAMP), header(headers, SLACK_SIGNATURE)
        return _slack(secrets, ts, sig, body, now, route.tolerance_s)
    return _bearer(secrets, header(headers, BEARER_HEADER))


def _mac(secret: bytes, message: bytes) -> str:
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def _any_match(secrets: list[bytes], message: bytes, given: list[str]) -> bool:
    """True when some secret's HMAC-SHA256 of ``message`` is one of ``given`` (hex); every pair compared."""
    found = False
    for secret in secrets:
        want = _mac(secret, message)
        for sig in given:
            found |= hmac.compare_digest(want, sig.lower())
    return found


def _github(secrets: list[bytes], value: str | None, body: bytes) -> AuthResult:
    if not value:
        return AuthResult(False, "missing")
    scheme, _, sig = value.strip().partition("=")
    if scheme != "sha256" or not _HEX.fullmatch(sig):
        return AuthResult(False, "malformed")
    return OK if _any_match(secrets, body, [sig]) else AuthResult(False, "bad_signature")


def _fresh(ts: str, now: float, tolerance_s: int) -> bool:
    return abs(now - int(ts)) <= tolerance_s


def _stripe(secrets: list[bytes], value: str | None, body: bytes, now: float, tolerance_s: int) -> AuthResult:
    if not value:
        return AuthResult(False, "missing")
    ts, sigs = "", []
    for item in value.split(","):
        key, _, val = item.strip().partition("=")
        if key == "t":
            ts = val
        elif key == "v1":  # Stripe may send several (its own secret rolling); other schemes are ignored
            sigs.append(val)
    if not _TS.fullmatch(ts) or not sigs or not all(_HEX.fullmatch(s) for s in sigs):
        return AuthResult(False, "malformed")
    if not _any_match(secrets, ts.encode() + b"." + body, sigs):
        return AuthResult(False, "bad_signature")
    return OK if _fresh(ts, now, tolerance_s) else AuthResult(False, "stale")


def _slack(
    secrets: list[bytes], ts: str | None, value: str | None, body: bytes, now: float, tolerance_s: int
) -> AuthResult:
    if not ts or not value:
        return AuthResult(False, "missing")
    version, _, sig = value.strip().partition("=")
    ts = ts.strip()
    if version != "v0" or not _HEX.fullmatch(sig) or not _TS.fullmatch(ts):
        return AuthResult(False, "malformed")
    if not _any_match(secrets, b"v0:" + ts.encode() + b":" + body, [sig]):
        return AuthResult(False, "bad_signature")
    return OK if _fresh(ts, now, tolerance_s) else AuthResult(False, "stale")


def _bearer(secrets: list[bytes], value: str | None) -> AuthResult:
    if not value:
        return AuthResult(False, "missing")
    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return AuthResult(False, "malformed")
    given = token.encode("utf-8", "surrogateescape")
    found = False
    for secret in secrets:
        found |= hmac.compare_digest(secret, given)
    return OK if found else AuthResult(False, "bad_signature")


def route_secrets(route: RouteSpec, env: Mapping[str, str]) -> list[bytes]:
    """The route's secrets by their names in ``env`` (``$GEODE_HOME/.env`` merged with the process
    environment by the caller), in the configured order; a name without a value is a one-line
    ``ConfigError`` naming the key and the route."""
    out: list[bytes] = []
    for name in route.secrets:
        value = env.get(name, "")
        if not value:
            raise ConfigError(
                f"webhook route {route.name!r}: {name} is not set: add {name}=<the secret> to "
                "$GEODE_HOME/.env (then geode reload)"
            )
        out.append(value.encode("utf-8"))
    return out
