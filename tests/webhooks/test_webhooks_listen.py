"""The webhooks child's listener (actors/webhooks.py) without a tree: an address already taken is one
``ConfigError`` line naming it (child_main logs it and exits 75: the supervisor's backoff shows it), and a
free one serves the app until the child stops."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from actors.tree.registry import ChildContext
from actors.webhooks import WebhooksProcess
from geode.home import GeodeHome
from geode.protocol.errors import ConfigError

ROUTE = """
[[webhooks.routes]]
name = "gh"
path = "/hooks/gh"
auth = "github"
secrets = ["GH_SECRET"]
prompt = "Summarize it."
"""


def process(tmp_path: Path, listen: str) -> WebhooksProcess:
    home = GeodeHome(tmp_path / "gh").ensure()
    home.config_file.write_text(f'[webhooks]\nlisten = "{listen}"\n{ROUTE}')
    bus = SimpleNamespace(transport=None)  # nothing here reaches the bus
    return WebhooksProcess(ChildContext("webhooks", 1, home), bus, plans=None)  # type: ignore[arg-type]


def test_a_taken_listen_address_is_one_named_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = process(tmp_path, f"127.0.0.1:{port}")
        with pytest.raises(ConfigError) as err:
            proc.serve_http()
    msg = err.value.message
    assert msg.startswith(f"webhooks: cannot listen on 127.0.0.1:{port}: ") and "\n" not in msg
    proc.stop()


def test_a_free_address_serves_the_app_until_stop(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = process(tmp_path, f"127.0.0.1:{port}")
    proc.serve_http()
    with pytest.raises(urllib.error.HTTPError) as got:  # served: an unknown path is the app's 404
        urllib.request.urlopen(f"http://127.0.0.1:{port}/hooks/nope", data=b"{}", timeout=5)
    assert got.value.code == 404
    got.value.close()
    proc.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/hooks/gh", data=b"{}", timeout=5)
