"""At chat start, one line when this shell's provider env (keys, endpoints, ``GEODE_MODEL``) differs from what
the running daemon uses, instead of silently using the daemon's: names only, never a value."""

from __future__ import annotations

import os
from collections.abc import Mapping

from geode.home import GeodeHome

FIELDS = (
    ("model", "model"),
    ("provider", "provider"),
    ("base_url", "endpoint"),
    ("key_fingerprint", "API key"),
)


def provider_env_names(env: Mapping[str, str] | None = None) -> list[str]:
    """The provider variables this shell sets (``GEODE_MODEL``, each vendor's key and base-URL variable)."""
    from geode.providers.vendors import VENDORS

    env = os.environ if env is None else env
    names = ["GEODE_MODEL"]
    for spec in VENDORS.values():
        names += [n for n in (spec.key_env, spec.base_url_env) if n and n not in names]
    return [n for n in names if env.get(n)]


def _maybe_provider_env(env: Mapping[str, str]) -> bool:
    """A cheap first look (no provider imports): does this shell set anything like a provider variable?"""
    return any(n == "GEODE_MODEL" or n.endswith(("_API_KEY", "_BASE_URL")) for n, v in env.items() if v)


def env_mismatch_note(home: GeodeHome) -> str | None:
    """The line to print, or None (the shell sets no provider variable, no daemon view, or they agree)."""
    if not _maybe_provider_env(os.environ) or not (home.run_dir / "providers.json").exists():
        return None  # the common case costs no imports (chat start stays fast)
    names = provider_env_names()
    if not names:
        return None
    from actors.cli.provider_view import shell_view
    from geode.providers.live import daemon_view

    daemon = daemon_view(home)
    if daemon is None:
        return None
    try:
        shell = shell_view(home)
    except Exception:  # the shell's own view is `geode doctor`'s business
        return None
    differ = [label for field, label in FIELDS if daemon.get(field) != shell.get(field)]
    if not differ:
        return None
    return (
        f"! this shell's provider env ({', '.join(names)}) differs from the running daemon's "
        f"({', '.join(differ)}); this chat uses the daemon's "
        f"{daemon.get('model')} ({daemon.get('provider')}). "
        f"Put them in {home.env_file} (new sessions read it) or restart the daemon from this shell "
        "(`geode stop`); `geode doctor` shows both."
    )
