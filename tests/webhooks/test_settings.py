"""``[webhooks]`` (geode.webhooks.settings): a route is refused at config load, in one line naming it and the
fix, when it has no auth, a literal secret (never echoed), bad secret names, a body-dedupe without its
window, a path outside /hooks/, a twin name or path; durations, the delivery chat and listen are parsed;
`geode reload` names the webhooks area (a rotated .env secret by name, never its value)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from geode.config_check import check_file
from geode.config_reload import WEBHOOKS, diff_config
from geode.config_schema import GeodeConfig
from geode.protocol.errors import ConfigError
from geode.webhooks.settings import listen_address, parse_listen

GH: dict[str, Any] = {
    "name": "github",
    "path": "/hooks/github",
    "auth": "github",
    "secrets": ["GITHUB_WEBHOOK_SECRET"],
    "prompt": "A GitHub event arrived.",
}
SECRET = "s3cr3t-value-that-must-never-be-shown"


def _config(*routes: dict[str, Any], **section: Any) -> GeodeConfig:
    return GeodeConfig.from_raw({"webhooks": {"routes": list(routes), **section}})


def _refused(*routes: dict[str, Any], **section: Any) -> str:
    with pytest.raises(ConfigError) as err:
        _config(*routes, **section)
    msg = err.value.message
    assert "\n" not in msg
    return msg


def test_a_route_reads_with_its_defaults_and_parsed_values() -> None:
    cfg = _config(
        GH,
        {
            **GH,
            "name": "stripe",
            "path": "/hooks/stripe",
            "auth": "stripe",
            "delivery_header": "",
            "dedupe_window": "24h",
            "deliver": "telegram:-100123",
            "json": False,
        },
        listen="127.0.0.1:8787",
        trusted_proxies=["127.0.0.1", "10.0.0.0/8"],
    )
    gh, stripe = cfg.webhooks.routes
    assert gh.delivery_header == "X-GitHub-Delivery" and gh.dedupe_window_s is None and gh.json_body
    assert (gh.rate_per_minute, gh.rate_burst, gh.max_body_bytes, gh.queue_max) == (120, 20, 262_144, 100)
    assert gh.deliver is None and gh.session == "new" and gh.allowed_tools == [] and gh.model == ""
    assert stripe.dedupe_window_s == 86_400.0 and stripe.json_body is False
    assert stripe.deliver is not None and stripe.deliver.destination == "telegram:-100123"
    assert listen_address(cfg.webhooks) == ("127.0.0.1", 8787)
    assert listen_address(GeodeConfig().webhooks) is None  # off by default
    assert parse_listen("[::1]:9000") == ("::1", 9000) and parse_listen("localhost:80") == ("localhost", 80)
    for window, seconds in (("90s", 90.0), (3600, 3600.0), ("1h30m", 5400.0)):
        route = {**GH, "delivery_header": "", "dedupe_window": window}
        assert _config(route).webhooks.routes[0].dedupe_window_s == seconds


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"auth": None}, "route 'github': auth: Field required"),
        ({"auth": "hmac"}, "route 'github': auth: Input should be"),
        ({"secrets": []}, "route 'github': secrets: List should have at least 1 item"),
        ({"secrets": ["A", "B", "C"]}, "route 'github': secrets: List should have at most 2 items"),
        ({"secrets": ["A", "A"]}, "secrets names the same key twice"),
        ({"delivery_header": ""}, 'delivery_header = "" dedupes by the body\'s sha256: set dedupe_window'),
        ({"auth": "slack"}, 'auth = "slack" sends no X-GitHub-Delivery: set delivery_header'),
        ({"path": "/github"}, "route 'github': path '/github': write one under /hooks/"),
        ({"path": "/hooks/../status/x"}, "write one under /hooks/"),
        ({"session": "named"}, "route 'github': session = \"named\" needs session_name"),
        ({"keep_headers": ["X-Hub-Signature-256"]}, "X-Hub-Signature-256 carries a credential"),
        ({"fields": ["headers.Authorization"]}, "name a header that carries no credential"),
        ({"fields": ["headers.X-GitHub-Event"]}, "add 'X-GitHub-Event' to keep_headers too"),
        ({"deliver": "telegram"}, "route 'github': deliver"),
        ({"workspace": "relative/ws"}, "is not an absolute path"),
        ({"dedupe_window": "soon"}, "is not an interval"),
        ({"unknown": 1}, "route 'github': unknown: Extra inputs are not permitted"),
    ],
)
def test_a_bad_route_is_refused_in_one_line_naming_it(change: dict[str, Any], expected: str) -> None:
    route = {k: v for k, v in {**GH, **change}.items() if v is not None}
    msg = _refused(route)
    assert msg.startswith("[webhooks] routes[0]") and expected in msg, msg


@pytest.mark.parametrize("key", ["secret", "token", "secret_value"])
def test_a_literal_secret_is_refused_and_never_shown(tmp_path: Path, key: str) -> None:
    msg = _refused({**GH, key: SECRET})
    assert (
        f"route 'github': {key} = <a value> is refused" in msg and "secrets live in $GEODE_HOME/.env" in msg
    )
    assert SECRET not in msg
    pasted = _refused({**GH, "secrets": [SECRET]})  # the value pasted where its name goes
    assert "secrets[0] is not an environment variable name" in pasted and SECRET not in pasted
    # `geode serve`'s start-up check says the same, without the value either
    path = tmp_path / "config.toml"
    path.write_text(
        f'[[webhooks.routes]]\nname = "github"\npath = "/hooks/github"\nauth = "github"\n'
        f'secrets = ["GITHUB_WEBHOOK_SECRET"]\nprompt = "p"\n{key} = "{SECRET}"\n'
    )
    report = check_file(path)
    assert not report.ok and any("secrets live in $GEODE_HOME/.env" in e for e in report.errors)
    assert all(SECRET not in line for line in report.errors + report.warnings)


def test_names_and_paths_are_unique_and_listen_and_proxies_are_checked() -> None:
    twin = _refused(GH, {**GH, "path": "/hooks/other"})
    assert "routes[0] and routes[1] are both named 'github'" in twin
    same_path = _refused(GH, {**GH, "name": "other"})
    assert "route 'other': path /hooks/github is already routes[0]'s" in same_path
    for bad in ("8787", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000", "::1:80", ":8787"):
        assert "write host:port such as 127.0.0.1:8787" in _refused(listen=bad), bad
    assert "is not an IP address or CIDR" in _refused(trusted_proxies=["proxy.local"])


def test_reload_names_the_webhooks_area_and_a_rotated_secret_by_name_only() -> None:
    old = _config(GH, listen="127.0.0.1:8787")
    routes = _config({**GH, "prompt": "Summarize it."}, listen="127.0.0.1:8787")
    change = diff_config(old, routes)
    assert change.areas == {WEBHOOKS} and not change.needs_serve
    assert change.lines() == ["webhooks: [webhooks] routes re-applied (the intake table stays)"]
    moved = diff_config(old, _config(GH, listen="127.0.0.1:9999"))
    assert moved.areas == frozenset() and moved.needs_serve == ("[webhooks] listen",)
    rotated = diff_config(old, old, {"GITHUB_WEBHOOK_SECRET": "old-value"}, {"GITHUB_WEBHOOK_SECRET": SECRET})
    assert rotated.areas == {WEBHOOKS}
    assert rotated.lines() == ["webhooks: GITHUB_WEBHOOK_SECRET changed re-applied (the intake table stays)"]
    assert SECRET not in " ".join(rotated.lines())


def test_a_route_body_limit_fits_what_the_intake_table_stores() -> None:
    """A route may not accept a body the intake table cannot store (it would answer 503 forever)."""
    from geode.records.intake_models import MAX_BODY
    from geode.webhooks.settings import MAX_BODY_CAP

    assert MAX_BODY_CAP <= MAX_BODY
