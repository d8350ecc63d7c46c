"""`geode doctor` asks what the running daemon uses and warns when this shell's provider env differs;
`geode reload` refuses an invalid config in one line (exit 78) and otherwise makes new sessions use the
edited config without a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.actors.tree_kit import FAST_CONFIG, geode, scripted_tree


def _doctor(home: Any) -> dict[str, dict[str, Any]]:
    r = geode(home, "doctor", "--json", timeout=30)
    return {ch["name"]: ch for ch in json.loads(r.stdout)["checks"]}


def test_doctor_compares_with_the_daemon_and_reload_applies_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "GEODE_MODEL"):
        monkeypatch.delenv(var, raising=False)
    models: list[str] = []

    def reply(req: Any) -> Any:
        models.append(req.body.get("model"))
        return {"text": "ok"}

    with scripted_tree(tmp_path, reply) as (home, server):
        checks = _doctor(home)
        daemon = checks["daemon provider"]
        assert daemon["ok"] and server.base_url in daemon["detail"] and "claude-sonnet-5" in daemon["detail"]
        assert "ANTHROPIC_API_KEY (.env)" in daemon["detail"] and "sk-test-key" not in json.dumps(checks)
        assert "shell env" not in checks  # this shell resolves the same

        monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # set in the shell only
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-shell-only-key")
        shell = _doctor(home)["shell env"]
        assert shell["warn"] and "endpoint http://127.0.0.1:9 here" in shell["detail"], shell
        assert "a different key" in shell["detail"] and "sk-shell-only" not in shell["detail"]
        assert str(home.env_file) in shell["detail"]
        monkeypatch.delenv("ANTHROPIC_BASE_URL")
        monkeypatch.delenv("ANTHROPIC_API_KEY")

        good = home.config_file.read_text()
        home.config_file.write_text(good + "\n[loop\n")
        bad = geode(home, "reload", timeout=30)
        assert bad.returncode == 78, (bad.stdout, bad.stderr)
        assert "invalid TOML" in bad.stderr and "Traceback" not in bad.stderr
        assert "config not re-read" in bad.stderr

        home.config_file.write_text(
            FAST_CONFIG
            + f'[providers]\nmodel = "claude-opus-5"\n[providers.anthropic]\nbase_url = "{server.base_url}"\n'
        )
        ok = geode(home, "reload", timeout=30)
        assert ok.returncode == 0, (ok.stdout, ok.stderr)
        assert "loop: providers.model 'claude-sonnet-5' → 'claude-opus-5' (next turn)" in ok.stdout, ok.stdout
        assert "new sessions use claude-opus-5 (anthropic)" in ok.stdout, ok.stdout
        asked = geode(home, "ask", "hi", timeout=60)
        assert asked.returncode == 0, asked.stderr
        assert models[-1] == "claude-opus-5"
