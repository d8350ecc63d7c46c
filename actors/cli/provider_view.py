"""What the running daemon uses for new sessions (model, provider, endpoint, key source) against this shell's
view, for `geode doctor`; and `geode reload`: validate the config, then have the loop workers re-read it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from geode.home import GeodeHome

EXIT_CONFIG = 78
RELOAD_WAIT_S = 5.0


def shell_view(home: GeodeHome) -> dict[str, Any]:
    """What this shell's environment (over ``.env``) and the config would resolve to."""
    from geode.providers.live import settings_view
    from geode.providers.selection import Sources, resolve_settings, setup_error

    src = Sources.load(home=home)
    settings = resolve_settings(None, sources=src)
    problem = setup_error(settings, src)
    return settings_view(settings, problem.message if problem else "")


def describe(view: dict[str, Any]) -> str:
    where = f"{view.get('model')} ({view.get('provider')}) at {view.get('base_url')}"
    return f"{where} · key {view.get('key_source')}"


def differences(daemon: dict[str, Any], shell: dict[str, Any]) -> list[str]:
    """The provider settings on which this shell and the daemon disagree (names only, never key material)."""
    out = []
    for field, label in (("model", "model"), ("base_url", "endpoint"), ("provider", "provider")):
        if daemon.get(field) != shell.get(field):
            out.append(f"{label} {shell.get(field)} here, {daemon.get(field)} in the daemon")
    if daemon.get("key_fingerprint") != shell.get("key_fingerprint"):
        here = "set" if shell.get("key_fingerprint") else "not set"
        there = "set" if daemon.get("key_fingerprint") else "not set"
        detail = "a different key" if here == there == "set" else f"{here} here, {there} in the daemon"
        out.append(f"API key: {detail}")
    return out


def daemon_checks(home: GeodeHome) -> list[dict[str, Any]]:
    """Doctor rows: what the running daemon uses, and a warning when this shell's provider env differs."""
    from geode.providers.live import daemon_view

    daemon = daemon_view(home)
    if daemon is None:
        return []
    rows = []
    if daemon.get("problem"):
        rows.append(_row("daemon provider", False, str(daemon["problem"])))
    else:
        rows.append(_row("daemon provider", True, f"new sessions use {describe(daemon)}"))
    try:
        diff = differences(daemon, shell_view(home))
    except Exception as exc:  # the shell's own view is reported by the key checks
        return [*rows, _row("shell env", False, f"{type(exc).__name__}: {exc}"[:300], warn=True)]
    if diff:
        hint = (
            "the daemon does not see this shell's environment: put keys and endpoints in "
            f"{home.env_file} (new sessions read it), or restart the daemon from this shell"
        )
        detail = "differs from the daemon: " + "; ".join(diff) + f" · {hint}"
        rows.append(_row("shell env", False, detail, warn=True))
    return rows


def reload_daemon(home: GeodeHome, *, echo: Callable[..., None], wait_s: float = RELOAD_WAIT_S) -> int:
    """``geode reload``: refuse an invalid config (exit 78, one line per problem), else rewrite the reload
    stamp and wait for a loop worker to publish what new sessions now use."""
    from actors.loop_worker import RELOAD_STAMP
    from actors.tree.client import is_running
    from actors.tree.config_sections import check_home_config
    from geode.config_file import remember_good
    from geode.providers.live import daemon_view

    if not is_running(home):
        echo("geode is not running; `geode serve` reads the config when it starts", err=True)
        return 1
    report = check_home_config(home)
    for line in report.warnings:
        echo(f"geode reload: warning: {line}", err=True)
    if not report.ok:
        for line in report.errors:
            echo(f"geode reload: {line}", err=True)
        echo("geode reload: config not re-read; the daemon keeps its current one", err=True)
        return EXIT_CONFIG
    remember_good(home, report.source)  # the tree's fallback while the file is broken from now on
    asked = time.time()
    stamp = home.run_dir / RELOAD_STAMP
    stamp.write_text(f"{asked:.6f}\n")
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        view = daemon_view(home)
        if view is not None and float(view.get("at", 0)) >= asked:
            if view.get("problem"):
                echo(f"config re-read; new sessions will fail: {view['problem']}", err=True)
                return 1
            echo(f"config re-read; new sessions use {describe(view)}")
            return 0
        time.sleep(0.1)
    echo(f"reload requested; no loop worker confirmed it within {wait_s:g}s (see {home.logs_dir})", err=True)
    return 1


def _row(name: str, ok: bool, detail: str, *, warn: bool = False) -> dict[str, Any]:
    return {"name": name, "ok": ok, "detail": detail, "warn": warn}
