"""What the running daemon uses for new sessions (model, provider, endpoint, key source) against this shell's
view, for `geode doctor` (`geode reload` is actors/cli/reload_cmd.py)."""

from __future__ import annotations

from typing import Any

from geode.home import GeodeHome


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


def _row(name: str, ok: bool, detail: str, *, warn: bool = False) -> dict[str, Any]:
    return {"name": name, "ok": ok, "detail": detail, "warn": warn}
