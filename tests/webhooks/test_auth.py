"""Who may post to a route (geode.webhooks.auth): GitHub's and Slack's documented signature vectors, Stripe's
signed timestamp, a stale or future timestamp refused, two secrets during a rotation, a bearer token, and a
missing .env secret named (never a value)."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest

from geode.protocol.errors import ConfigError
from geode.webhooks.auth import route_secrets, verify
from geode.webhooks.settings import RouteSpec

# GitHub's documented test vector (docs.github.com, "Validating webhook deliveries")
GH_SECRET = b"It's a Secret to Everybody"
GH_BODY = b"Hello, World!"
GH_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
# Slack's documented example (api.slack.com, "Verifying requests from Slack")
SLACK_SECRET = b"8f742231b10e8888abcd99yyyzzz85a5"
SLACK_TS = "1531420618"
SLACK_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
    b"&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
    b"&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
    b"&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
SLACK_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
NOW = 1_800_000_000.0


def _route(auth: str, **kw: Any) -> RouteSpec:
    extra = {} if auth == "github" else {"delivery_header": "", "dedupe_window": "24h"}
    return RouteSpec.model_validate(
        {"name": auth, "path": f"/hooks/{auth}", "auth": auth, "secrets": ["A"], "prompt": "p", **extra, **kw}
    )


def _stripe_header(secret: bytes, t: int, body: bytes) -> str:
    sig = hmac.new(secret, f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={sig},v0=deadbeef"


def test_githubs_documented_vector_passes_and_anything_else_is_named() -> None:
    gh = _route("github")
    assert verify(gh, [GH_SECRET], {"X-Hub-Signature-256": GH_SIGNATURE}, GH_BODY, NOW).ok
    # header names are case-insensitive (a proxy may lower-case them)
    assert verify(
        gh,
        [GH_SECRET],
        {"x-hub-signature-256": GH_SIGNATURE.upper().replace("SHA256", "sha256")},
        GH_BODY,
        NOW,
    ).ok
    assert verify(gh, [b"another secret"], {"X-Hub-Signature-256": GH_SIGNATURE}, GH_BODY, NOW).reason == (
        "bad_signature"
    )
    assert verify(gh, [GH_SECRET], {"X-Hub-Signature-256": GH_SIGNATURE}, GH_BODY + b" ", NOW).reason == (
        "bad_signature"
    )
    assert verify(gh, [GH_SECRET], {}, GH_BODY, NOW).reason == "missing"
    assert verify(gh, [GH_SECRET], {"X-Hub-Signature": "sha1=" + "0" * 40}, GH_BODY, NOW).reason == "missing"
    for bad in ("sha1=" + "0" * 64, "sha256=xyz", "757107ea0eb2509fc211221cce984b8a"):
        assert verify(gh, [GH_SECRET], {"X-Hub-Signature-256": bad}, GH_BODY, NOW).reason == "malformed"


def test_slacks_documented_example_passes_only_within_the_tolerance() -> None:
    slack = _route("slack")
    headers = {"X-Slack-Request-Timestamp": SLACK_TS, "X-Slack-Signature": SLACK_SIGNATURE}
    at = float(SLACK_TS)
    assert verify(slack, [SLACK_SECRET], headers, SLACK_BODY, at + 299).ok
    assert verify(slack, [SLACK_SECRET], headers, SLACK_BODY, at + 301).reason == "stale"  # a captured replay
    assert verify(slack, [SLACK_SECRET], headers, SLACK_BODY, at - 301).reason == "stale"  # from the future
    assert (
        verify(_route("slack", tolerance_s=60), [SLACK_SECRET], headers, SLACK_BODY, at + 61).reason
        == "stale"
    )
    moved = {**headers, "X-Slack-Request-Timestamp": str(int(SLACK_TS) + 1)}  # the timestamp is signed
    assert verify(slack, [SLACK_SECRET], moved, SLACK_BODY, at).reason == "bad_signature"
    assert (
        verify(slack, [SLACK_SECRET], {"X-Slack-Signature": SLACK_SIGNATURE}, SLACK_BODY, at).reason
        == "missing"
    )
    bad = {**headers, "X-Slack-Signature": "v1=" + SLACK_SIGNATURE[3:]}
    assert verify(slack, [SLACK_SECRET], bad, SLACK_BODY, at).reason == "malformed"


def test_stripe_signs_the_timestamp_and_a_stale_one_is_refused() -> None:
    stripe, secret, body = _route("stripe"), b"whsec_test_abc", b'{"id":"evt_1","type":"charge.succeeded"}'
    t = int(NOW)
    assert verify(stripe, [secret], {"Stripe-Signature": _stripe_header(secret, t, body)}, body, NOW + 10).ok
    stale = _stripe_header(secret, t - 301, body)
    assert verify(stripe, [secret], {"Stripe-Signature": stale}, body, NOW).reason == "stale"
    forged = _stripe_header(secret, t, body).replace(f"t={t}", f"t={t + 5}")  # a re-dated capture
    assert verify(stripe, [secret], {"Stripe-Signature": forged}, body, NOW).reason == "bad_signature"
    assert (
        verify(
            stripe, [b"whsec_other"], {"Stripe-Signature": _stripe_header(secret, t, body)}, body, NOW
        ).reason
        == "bad_signature"
    )
    assert verify(stripe, [secret], {"Stripe-Signature": "t=abc,v1=00"}, body, NOW).reason == "malformed"
    assert verify(stripe, [secret], {"Stripe-Signature": f"t={t}"}, body, NOW).reason == "malformed"
    # Stripe may send several v1 signatures (its own rolling): one of them matching is enough
    two = f"t={t},v1={'0' * 64},v1={_stripe_header(secret, t, body).split('v1=')[1].split(',')[0]}"
    assert verify(stripe, [secret], {"Stripe-Signature": two}, body, NOW).ok


def test_during_a_rotation_either_of_the_two_secrets_is_accepted() -> None:
    gh = _route("github", secrets=["OLD", "NEW"])
    old, new = b"old-secret", b"new-secret"
    for secret in (old, new):
        sig = "sha256=" + hmac.new(secret, GH_BODY, hashlib.sha256).hexdigest()
        assert verify(gh, [old, new], {"X-Hub-Signature-256": sig}, GH_BODY, NOW).ok
    retired = "sha256=" + hmac.new(b"retired", GH_BODY, hashlib.sha256).hexdigest()
    assert verify(gh, [old, new], {"X-Hub-Signature-256": retired}, GH_BODY, NOW).reason == "bad_signature"
    assert verify(gh, [new], {"X-Hub-Signature-256": GH_SIGNATURE}, GH_BODY, NOW).reason == "bad_signature"
    assert verify(gh, [], {"X-Hub-Signature-256": GH_SIGNATURE}, GH_BODY, NOW).ok is False  # no secret: never


def test_a_bearer_route_takes_its_token_only() -> None:
    bearer = _route("bearer", secrets=["T1", "T2"])
    tokens = [b"tok-one", b"tok-two"]
    assert verify(bearer, tokens, {"Authorization": "Bearer tok-two"}, b"{}", NOW).ok
    assert verify(bearer, tokens, {"authorization": "bearer tok-one"}, b"{}", NOW).ok
    assert verify(bearer, tokens, {"Authorization": "Bearer tok-three"}, b"{}", NOW).reason == "bad_signature"
    assert verify(bearer, tokens, {"Authorization": "Bearer tok-on"}, b"{}", NOW).reason == "bad_signature"
    assert verify(bearer, tokens, {"Authorization": "Basic dG9rLW9uZQ=="}, b"{}", NOW).reason == "malformed"
    assert verify(bearer, tokens, {}, b"{}", NOW).reason == "missing"


def test_route_secrets_reads_the_names_and_a_missing_one_is_named_never_a_value() -> None:
    gh = _route("github", secrets=["GH_OLD", "GH_NEW"])
    env = {"GH_OLD": "first value", "GH_NEW": "second value", "OTHER": "x"}
    assert route_secrets(gh, env) == [b"first value", b"second value"]
    with pytest.raises(ConfigError) as err:
        route_secrets(gh, {"GH_OLD": "first value"})
    msg = str(err.value)
    assert "GH_NEW" in msg and "'github'" in msg and "$GEODE_HOME/.env" in msg
    assert "first value" not in msg and "\n" not in msg
