"""One ``listen = "host:port"`` setting (the webhooks' and the metrics page's), parsed in one place."""

from __future__ import annotations

import ipaddress
import re


def parse_listen(listen: str, example_port: int) -> tuple[str, int]:
    """``"host:port"`` (``"[::1]:PORT"`` for IPv6) as ``(host, port)``; ``ValueError`` in one line whose
    example uses ``example_port``."""
    host, sep, port = listen.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            host = ""
    elif ":" in host:
        host = ""
    ok_host = bool(host) and bool(re.fullmatch(r"[A-Za-z0-9.\-:]{1,253}", host))
    if not sep or not ok_host or not port.isdigit() or not 0 <= int(port) <= 65_535:
        raise ValueError(
            f"listen = {listen!r}: write host:port such as 127.0.0.1:{example_port} ([::1]:{example_port} for"
            " IPv6), or '' for off"
        )
    return host, int(port)
