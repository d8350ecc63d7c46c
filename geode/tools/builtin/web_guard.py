"""web_fetch's address checks: which URLs may be fetched and which IPs a host resolved to may be reached
(loopback, link-local, private, multicast, reserved and cloud metadata refused unless allowlisted), and the
hosts fetched without asking."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from socket import getaddrinfo

import httpx

from geode.tools.handlers import ToolFailure
from geode.tools.settings import Net, WebFetchSection, parse_allow_entry, parse_host_entry

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
BLOCKED = "web_fetch_blocked_address"
SCHEMES = ("http", "https")

# cloud instance metadata endpoints (AWS/GCP/Azure/Oracle, ECS task metadata, Alibaba, AWS IPv6)
METADATA_IPS = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254")
)
METADATA_NAMES = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"}
)


def _nets(*cidrs: str) -> tuple[Net, ...]:
    return tuple(ipaddress.ip_network(c) for c in cidrs)


# first match wins; the class names what the refusal says
V4_CLASSES: tuple[tuple[str, tuple[Net, ...]], ...] = (
    ("unspecified", _nets("0.0.0.0/8")),  # "this network": 0.x.y.z reaches the local host on Linux
    ("loopback", _nets("127.0.0.0/8")),
    ("link_local", _nets("169.254.0.0/16")),
    ("private", _nets("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")),  # + CGNAT
    ("multicast", _nets("224.0.0.0/4")),
    (
        "reserved",
        _nets(
            "240.0.0.0/4",  # incl. 255.255.255.255
            "192.0.0.0/24",
            "192.0.2.0/24",
            "192.88.99.0/24",
            "198.18.0.0/15",
            "198.51.100.0/24",
            "203.0.113.0/24",
        ),
    ),
)
V6_CLASSES: tuple[tuple[str, tuple[Net, ...]], ...] = (
    ("unspecified", _nets("::/128")),
    ("loopback", _nets("::1/128")),
    ("link_local", _nets("fe80::/10")),
    ("private", _nets("fc00::/7", "fec0::/10")),  # unique local; deprecated site-local
    ("multicast", _nets("ff00::/8")),
    ("reserved", _nets("100::/64", "2001::/23", "2001:db8::/32", "3fff::/20", "64:ff9b:1::/48")),
)
GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")
# IPv6 forms that carry an IPv4 address in their low 32 bits: the IPv4 address decides
EMBEDDING_V6 = _nets("::ffff:0:0/96", "::/96", "::ffff:0:0:0/96", "64:ff9b::/96")


def embedded_v4(ip: IP) -> ipaddress.IPv4Address | None:
    """The IPv4 address inside an IPv4-mapped/-compatible, SIIT, NAT64 or 6to4 IPv6 address."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in ipaddress.ip_network("::/127"):  # :: and ::1 are themselves, not 0.0.0.0 / 0.0.0.1
        return None
    if any(ip in net for net in EMBEDDING_V6):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_class(ip: IP) -> str | None:
    """Why ``ip`` may not be fetched ("loopback", "metadata", "private (IPv4-mapped)" ...), None if public."""
    if ip.version == 6 and ip.scope_id:  # type: ignore[union-attr]
        ip = ipaddress.IPv6Address(str(ip).split("%", 1)[0])
    if ip in METADATA_IPS:
        return "metadata"
    inner = embedded_v4(ip)
    if inner is not None:
        cls = address_class(inner)
        return f"{cls} (IPv4 embedded in IPv6)" if cls else None
    for name, nets in V4_CLASSES if ip.version == 4 else V6_CLASSES:
        if any(ip in net for net in nets):
            return name
    if ip.version == 6 and ip not in GLOBAL_UNICAST_V6:
        return "reserved"
    return None


def host_of(url: httpx.URL) -> str:
    """The host a checked URL names, as every check compares it (lowercase, no trailing dot)."""
    return url.raw_host.decode("ascii").lower().rstrip(".")


@dataclass(frozen=True)
class WebAllow:
    """``[tools.web_fetch] allow_hosts``: hostnames and CIDRs that may be fetched although not public;
    ``[tools.web_fetch] hosts`` (``fetch_hosts``): hosts fetched without asking (``*.domain``: subdomains)."""

    hosts: frozenset[str] = frozenset()
    nets: tuple[Net, ...] = ()
    fetch_hosts: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, entries: Iterable[str], fetch_hosts: Iterable[str] = ()) -> WebAllow:
        parsed = [parse_allow_entry(e) for e in entries]
        return cls(
            hosts=frozenset(p for p in parsed if isinstance(p, str)),
            nets=tuple(p for p in parsed if not isinstance(p, str)),
            fetch_hosts=frozenset(parse_host_entry(h) for h in fetch_hosts),
        )

    @classmethod
    def from_section(cls, section: WebFetchSection) -> WebAllow:
        """From the typed ``[tools.web_fetch]`` (its entries already checked at start)."""
        return cls.parse(section.allow_hosts, section.hosts)

    def names(self, host: str) -> bool:
        return host in self.hosts

    def without_asking(self, host: str) -> bool:
        """Whether ``hosts`` lists ``host`` (or a ``*.`` entry of a domain it is under)."""
        if host in self.fetch_hosts:
            return True
        labels = host.split(".")
        return any("*." + ".".join(labels[i:]) in self.fetch_hosts for i in range(1, len(labels)))

    def covers(self, ip: IP) -> bool:
        inner = embedded_v4(ip)
        return any(ip in net or (inner is not None and inner in net) for net in self.nets)


@dataclass(frozen=True)
class Target:
    """One checked hop: the URL as given, its host and port, and the addresses it may be fetched from."""

    url: httpx.URL
    host: str
    port: int
    addresses: tuple[IP, ...]


def blocked(host: str, ip: IP | None, cls: str) -> ToolFailure:
    where = f"{host} ({ip})" if ip is not None and str(ip) != host else host
    return ToolFailure(
        f"web_fetch refused {where}: {cls} address; only public addresses can be fetched "
        "unless [tools.web_fetch] allow_hosts names them",
        BLOCKED,
        host=host,
        address=str(ip) if ip is not None else None,
        address_class=cls,
    )


def check_url(url: str | httpx.URL) -> httpx.URL:
    """The parsed URL if its scheme and form may be fetched (ToolFailure "invalid_url" otherwise)."""
    try:
        parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise ToolFailure(f"invalid URL: {exc}"[:300], "invalid_url") from None
    if parsed.scheme not in SCHEMES:
        raise ToolFailure("only http and https URLs can be fetched", "invalid_url")
    if parsed.userinfo:
        raise ToolFailure("URLs with credentials (user@host) are not fetched", "invalid_url")
    if not parsed.raw_host:
        raise ToolFailure("the URL has no host", "invalid_url")
    return parsed


def resolve(host: str, port: int) -> tuple[IP, ...]:
    """Every address ``host`` resolves to (an IP literal is itself), in resolver order, once."""
    try:
        return (ipaddress.ip_address(host),)
    except ValueError:
        pass
    try:
        infos = getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ToolFailure(f"fetch failed: cannot resolve {host}: {exc}"[:300], "fetch_failed") from None
    found: list[IP] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if ip not in found:
            found.append(ip)
    if not found:
        raise ToolFailure(f"fetch failed: {host} has no address", "fetch_failed")
    return tuple(found)


def check_target(url: str | httpx.URL, allow: WebAllow) -> Target:
    """Check one hop: URL form, host name, and EVERY address the host resolves to (resolved once here; the
    fetch must connect to one of ``Target.addresses``, never resolve again)."""
    parsed = check_url(url)
    host = host_of(parsed)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    named = allow.names(host)
    if host in METADATA_NAMES and not named:
        raise blocked(host, None, "metadata")
    addresses = resolve(host, port)
    if not named:
        for ip in addresses:
            cls = address_class(ip)
            if cls is not None and not allow.covers(ip):
                raise blocked(host, ip, cls)
    return Target(parsed, host, port, addresses)
