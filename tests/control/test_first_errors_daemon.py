"""A daemon that cannot start says why in one line, with exit 78 daemonized as in the foreground (never a
traceback, never older runs' output); the CLI says `starting the daemon…` while it starts it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, make_home, scripted_home, stop


def test_invalid_toml_daemonized_exits_78_with_the_foreground_lines(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    home.config_file.write_text('[providers]\nmodel = "claude\n')
    fg = geode(home, "serve", "--foreground", timeout=60)
    assert fg.returncode == 78, fg.stderr
    for _ in range(2):  # the second start must not repeat the first one's output
        bg = geode(home, "serve", timeout=60)
        assert bg.returncode == 78, (bg.stdout, bg.stderr)
        assert "Traceback" not in bg.stdout + bg.stderr
        assert bg.stderr.strip().splitlines() == fg.stderr.strip().splitlines(), (bg.stderr, fg.stderr)
    ask = geode(home, "ask", "hi", timeout=60)
    assert ask.returncode != 0
    lines = ask.stderr.strip().splitlines()
    assert lines[0] == "starting the daemon…", lines
    assert len(lines) == 2 and "the daemon cannot start:" in lines[1] and "invalid TOML" in lines[1], lines
    assert "refusing to start" not in lines[1] and "Traceback" not in ask.stderr


def test_ask_says_it_starts_the_daemon(tmp_path: Path) -> None:
    def reply(_req: Any) -> Any:
        return {"text": "hello"}

    server = ScriptedServer(reply).start()
    try:
        home = scripted_home(tmp_path, server)
        try:
            r = geode(home, "ask", "hi", timeout=90)
            assert r.returncode == 0, r.stderr
            assert r.stderr.splitlines()[0] == "starting the daemon…", r.stderr
            assert "hello" in r.stdout
            again = geode(home, "ask", "hi", timeout=60)
            assert again.returncode == 0 and "starting the daemon" not in again.stderr
        finally:
            stop(home)
    finally:
        server.stop()


def test_a_child_that_keeps_exiting_ends_the_start_early_with_its_error(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the workspace directory should be")
    home = make_home(tmp_path, f'[tools]\ndefault_workspace = "{blocker / "ws"}"\n')
    t0 = time.monotonic()
    r = geode(home, "serve", timeout=60)
    took = time.monotonic() - t0
    print(f"\ngeode serve gave up after {took:.1f}s")
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("executor keeps exiting at start: "), lines
    assert "NotADirectoryError" in lines[0] and "executor.log" in lines[0], lines
    assert took < 20, took  # not the 30 s readiness timeout
    assert geode(home, "status").returncode == 1  # nothing left running
