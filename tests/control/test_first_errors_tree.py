"""First errors on a real `geode serve` tree: no key → one line naming the variable, at once, no request
sent; the key then added to $GEODE_HOME/.env is used by the next session after `geode reload` (no restart);
an unknown model → the known prefixes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_home, serve, stop

NO_KEY = "no ANTHROPIC_API_KEY for claude-sonnet-5: set it in $GEODE_HOME/.env or the daemon's environment"


def test_no_key_then_key_in_dotenv_then_unknown_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "GEODE_MODEL"):
        monkeypatch.delenv(var, raising=False)

    def reply(_req: Any) -> Any:
        return {"text": "hello from the scripted model"}

    server = ScriptedServer(reply).start()
    try:
        home = scripted_home(tmp_path, server)
        home.env_file.unlink()  # a new user: no key anywhere
        serve(home)
        try:
            t0 = time.monotonic()
            r = geode(home, "ask", "hi", timeout=30)
            took = time.monotonic() - t0
            print(f"\ngeode ask without a key exited after {took:.2f}s")
            assert r.returncode == 1, (r.stdout, r.stderr)
            assert NO_KEY in r.stderr and "retrying" not in r.stdout + r.stderr, r.stderr
            assert took < 2.0, took
            assert server.requests == []  # nothing was sent, nothing retried

            home.env_file.write_text("ANTHROPIC_API_KEY=sk-test-key\n")  # no restart: `geode reload` reads it
            reloaded = geode(home, "reload", timeout=30)
            assert reloaded.returncode == 0, reloaded.stderr
            ok = geode(home, "ask", "hi again", timeout=60)
            assert ok.returncode == 0, ok.stderr
            assert "hello from the scripted model" in ok.stdout
            assert len(server.requests) == 1

            bad = geode(home, "ask", "hi", "--model", "foo-bar", timeout=30)
            assert bad.returncode == 1, bad.stderr
            line = [ln for ln in bad.stderr.splitlines() if "unknown model" in ln]
            assert line and "'foo-bar'" in line[0] and "claude-" in line[0] and "gpt-" in line[0], bad.stderr
            assert len(server.requests) == 1  # foo-bar was not sent to any provider
        finally:
            stop(home)
    finally:
        server.stop()
