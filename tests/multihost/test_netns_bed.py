"""The multi-host test bed itself (scripts/netns-hosts): three namespaces on one bridge, the scripted provider
on main's address reachable from a worker host, a cut link stops traffic and a restored one carries it again,
and `down` leaves no namespace behind."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from geode.testing.scripted import ScriptedServer
from tests.multihost.netns_kit import SCRIPT, Bed, unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

FETCH = """
import json, sys, urllib.request
req = urllib.request.Request(sys.argv[1] + "/v1/messages", data=json.dumps(
    {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"content-type": "application/json"})
try:
    print(json.loads(urllib.request.urlopen(req, timeout=float(sys.argv[2])).read())["content"][0]["text"])
except OSError as exc:
    print("unreachable", type(exc).__name__)
"""


@pytest.fixture(scope="module")
def bed() -> Iterator[tuple[Bed, ScriptedServer]]:
    b = Bed.up()
    try:
        server = b.start_provider(lambda req: {"text": "pong"})
        try:
            yield b, server
        finally:
            server.stop()
    finally:
        b.down()


def _fetch(b: Bed, host: str, url: str, timeout_s: float) -> str:
    r = subprocess.run(
        b.argv(host, "python3", "-c", FETCH, url, str(timeout_s)), capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_hosts_have_their_addresses_and_homes(bed: tuple[Bed, ScriptedServer]) -> None:
    b, server = bed
    assert {h: b.hosts[h].address for h in b.hosts} == {
        "main": "10.77.0.1",
        "w1": "10.77.0.2",
        "w2": "10.77.0.3",
    }
    assert len({h.home.root for h in b.hosts.values()}) == 3
    assert server.base_url.startswith("http://10.77.0.1:")
    out = subprocess.run(b.argv("w2", "ip", "-brief", "addr"), capture_output=True, text=True).stdout
    assert "10.77.0.3/24" in out and "lo" in out


def test_run_executes_in_the_hosts_namespace_with_its_home(bed: tuple[Bed, ScriptedServer]) -> None:
    b, _server = bed
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "run", "w1", "--suffix", b.suffix, "--", "sh", "-c", RUN],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    home, addrs = r.stdout.split("\n", 1)
    assert home == str(b.hosts["w1"].home.root) and "10.77.0.2/24" in addrs, r.stdout


RUN = 'echo "$GEODE_HOME"; ip -brief addr'


def test_the_provider_on_main_is_reachable_from_w1_and_a_cut_link_stops_it(
    bed: tuple[Bed, ScriptedServer],
) -> None:
    b, server = bed
    assert _fetch(b, "w1", server.base_url, 5) == "pong"
    b.cut("w1")
    try:
        assert _fetch(b, "w1", server.base_url, 1).startswith("unreachable")
        assert _fetch(b, "w2", server.base_url, 5) == "pong"  # only w1 is cut
    finally:
        b.restore("w1")
    assert _fetch(b, "w1", server.base_url, 5) == "pong"


def test_the_root_namespace_does_not_reach_the_bed(bed: tuple[Bed, ScriptedServer]) -> None:
    """The provider lives in main's namespace only: the bed does not leak onto the machine's network."""
    _b, server = bed
    assert _fetch_root(server.base_url).startswith("unreachable")


def _fetch_root(url: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", FETCH, url, "1"], capture_output=True, text=True, timeout=30
    ).stdout.strip()


def test_down_is_idempotent_and_a_second_bed_has_its_own_names() -> None:
    other = Bed.up()
    try:
        assert other.hosts["main"].ns.startswith("geode-main-") and other.suffix in other.hosts["w1"].ns
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert other.hosts["w2"].ns in names
    finally:
        other.down()
        other.down()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(h.ns in names for h in other.hosts.values())
