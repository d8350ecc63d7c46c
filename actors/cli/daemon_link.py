"""Reaching the daemon from the CLI: this CLI's version for the handshake, whether a tree serves the home (a
file check), and the one-round-trip connect that falls back to starting or waiting for the daemon."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `geode --version` imports this module for client_version alone
    from actors.cli.client import ControlClient
    from geode.home import GeodeHome
    from geode.home_paths import HomePaths


def client_version() -> str:
    """This CLI's version for the handshake (``actors.control.geode_version`` without importing the control
    child's module: that import alone cost the CLI ~100 ms). Read from the installed distribution's
    ``METADATA`` found on ``sys.path`` as ``importlib.metadata`` finds it (importing that package cost
    `geode ask` and `geode --version` ~25 ms); anything unusual goes to ``importlib.metadata`` itself."""
    found = _dist_info_version("geode")
    if found is not None:
        return found
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("geode")
    except PackageNotFoundError:
        return "0+unknown"


def _dist_info_version(name: str) -> str | None:
    """``Version:`` of the first ``<name>-*.dist-info/METADATA`` (or ``<name>*.egg-info/PKG-INFO``) on
    ``sys.path``, as importlib.metadata finds it; None when in any doubt (a zip, an egg-info file, two
    distributions of that name in one directory)."""
    import os
    import sys

    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        infos = [n for n in names if n.lower().startswith((f"{name}-", f"{name}.")) and n.endswith("-info")]
        if not infos:
            continue
        if len(infos) > 1:
            return None
        meta = "METADATA" if infos[0].endswith(".dist-info") else "PKG-INFO"  # an egg-info (a dev checkout)
        try:
            with open(os.path.join(entry or ".", infos[0], meta), encoding="utf-8") as f:
                head = [next(f, "") for _ in range(8)]
        except OSError:
            return None
        fields = dict(line.rstrip("\n").split(": ", 1) for line in head if ": " in line)
        return fields.get("Version") if fields.get("Name", "").lower() == name else None
    return None


def serving(home: GeodeHome | HomePaths) -> bool:
    """A supervisor holds ``home`` and the control socket file exists: a file check, no round trip."""
    import os

    from actors.tree.instance_lock import InstanceLock

    return os.path.exists(home.cli_socket) and InstanceLock(home.lock_file).is_held()


def connect_daemon(cl: ControlClient, **handshake: Any) -> dict[str, Any]:
    """Handshake with the daemon in one round trip: when a tree serves the home, the handshake is the first
    message (no ``cli.ping`` on a socket of its own before it). When none serves it, or the handshake gets
    no answer (a control child restarting), start the daemon or wait for it as before
    (:func:`actors.cli.daemon_start.ensure_daemon`) and handshake again on a new socket."""
    from geode.protocol.errors import NotReady, RequestTimeout, Unavailable

    if serving(cl.home):
        try:
            return cl.connect(**handshake)
        except (RequestTimeout, Unavailable, NotReady):
            cl.drop()
    from actors.cli.daemon_start import ensure_daemon
    from geode.home import full_home

    ensure_daemon(full_home(cl.home))
    return cl.connect(**handshake)
