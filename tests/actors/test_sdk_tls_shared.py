"""The anthropic SDK's clients of a process verify with one TLS context, the one the zygote built before it
forked the loop workers (``geode/providers/sdk_tls.py``): each client used to load the CA bundle into a
context of its own, ~1.3-3 MiB of private memory in every loop worker (docs/benchmarks.md, "Start, restart
and memory"). The requests still go out as before, through the SDK's own default HTTP client."""

from __future__ import annotations

import ssl
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest

from actors.tree.sdk_warmup import build_and_drop
from geode.conversation import Message
from geode.providers import sdk_tls
from geode.providers.types import ModelRequest
from geode.testing.scenario import Scenario
from geode.testing.scripted import ScriptedServer
from tests.providers.conftest import FakeTime, build

WIRE = "anthropic-messages"


def _context(client: Any) -> ssl.SSLContext:
    """The context the client's transport opens its TLS connections with (geode's HTTP/1.1 transport)."""
    ctx = client._client._transport.ssl_context
    assert isinstance(ctx, ssl.SSLContext)
    return ctx


def test_the_zygotes_context_is_the_one_every_worker_client_verifies_with() -> None:
    assert anthropic.__name__ in sys.modules  # imported, as in the zygote
    assert build_and_drop(["anthropic"]) == ["anthropic"]  # what the zygote does, before forking the workers
    zygote_built = sdk_tls.built_count
    with ScriptedServer() as server:
        server.set_scenario(Scenario.of("one", "two", "three"))
        adapters = [build(WIRE, server, FakeTime()) for _ in range(3)]  # three endpoints' clients
        contexts = {id(_context(a.client)) for a in adapters}
        for adapter, text in zip(adapters, ("one", "two", "three"), strict=True):
            req = ModelRequest(model="claude-opus-5-5", messages=(Message.user_text("hi"),))
            assert adapter.complete(req).text == text
    assert contexts == {id(sdk_tls.shared_context())}
    assert sdk_tls.built_count == zygote_built  # no CA bundle loaded again for them


def test_a_changed_ca_file_gets_a_context_of_its_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``SSL_CERT_FILE`` set after the zygote built its context (the SDK reads it per client): honoured."""
    before = sdk_tls.shared_context()
    cafile = ssl.get_default_verify_paths().openssl_cafile
    if not Path(cafile).is_file():
        pytest.skip(f"no CA file at {cafile}")
    copy = tmp_path / "ca.pem"
    copy.write_bytes(Path(cafile).read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(copy))
    mine = sdk_tls.shared_context()
    assert mine is not before
    assert sdk_tls.shared_context() is mine
    monkeypatch.delenv("SSL_CERT_FILE")
    assert sdk_tls.shared_context() is not mine
