"""Reaching the daemon from the CLI: this CLI's version for the handshake, whether a tree serves the home (a
file check), and the one-round-trip connect that falls back to starting or waiting for the daemon."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from geode.home import GeodeHome
from geode.protocol.errors import NotReady, RequestTimeout, Unavailable

if TYPE_CHECKING:
    from actors.cli.client import ControlClient


def client_version() -> str:
    """This CLI's version for the handshake (``actors.control.geode_version`` without importing the control
    child's module: that import alone cost the CLI ~100 ms)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("geode")
    except PackageNotFoundError:
        return "0+unknown"


def serving(home: GeodeHome) -> bool:
    """A supervisor holds ``home`` and the control socket file exists: a file check, no round trip."""
    from actors.tree.instance_lock import InstanceLock

    return home.cli_socket.exists() and InstanceLock(home.lock_file).is_held()


def connect_daemon(cl: ControlClient, **handshake: Any) -> dict[str, Any]:
    """Handshake with the daemon in one round trip: when a tree serves the home, the handshake is the first
    message (no ``cli.ping`` on a socket of its own before it). When none serves it, or the handshake gets
    no answer (a control child restarting), start the daemon or wait for it as before
    (:func:`actors.cli.daemon_start.ensure_daemon`) and handshake again on a new socket."""
    if serving(cl.home):
        try:
            return cl.connect(**handshake)
        except (RequestTimeout, Unavailable, NotReady):
            cl.drop()
    from actors.cli.daemon_start import ensure_daemon

    ensure_daemon(cl.home)
    return cl.connect(**handshake)
