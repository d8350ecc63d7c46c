"""web_fetch loads the CA bundle once per process, not once per fetch (issue 34: ~35 ms of CPU each)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import pytest

from geode.tools.builtin import web
from geode.tools.builtin.web_guard import WebAllow
from tests.tools.web_fetch_kit import LocalServer


@pytest.fixture
def server() -> Iterator[LocalServer]:
    s = LocalServer({})
    yield s
    s.close()


def test_fetches_share_one_ca_bundle_load(
    make_rig: Any, server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[Any] = []
    real = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *a: Any, **k: Any) -> None:
        loads.append(a or k)
        real(self, *a, **k)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    web._tls.cache_clear()
    rig = make_rig(services={"web_fetch": WebAllow.parse(("127.0.0.1",), ("127.0.0.1",))})
    for _ in range(3):
        res = rig.call("web_fetch", {"url": f"{server.base}/page"})
        assert not res.is_error and res.content["text"] == "fetched", res.content
    assert len(server.seen) == 3
    assert len(loads) == 1  # one context for the process (was one per fetch: 3)
