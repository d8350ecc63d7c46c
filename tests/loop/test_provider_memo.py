"""A loop worker resolves a turn's provider again only when something it depends on changed (issue 34,
session 5; geode/loop/provider_memo.py): the model asked for, the process environment, the config source's
snapshot or ``.env`` (``geode reload``), or, for a model Codex can serve, every turn (the login file). What
``run/providers.json`` says stays what each turn's resolution would have written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from geode.config_schema import GeodeConfig
from geode.config_source import ConfigSource
from geode.home import GeodeHome
from geode.loop.turn_providers import TurnProviders
from geode.providers.live import STATUS_FILE

MODEL = "claude-opus-5-5"


@pytest.fixture
def providers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TurnProviders, list[str | None]]:
    """The worker's providers over a real home and config source; the live resolutions, counted."""
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEODE_MODEL", "CODEX_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-first")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-first")
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "no-codex"))
    home = GeodeHome(tmp_path / "h").ensure()
    home.run_dir.mkdir(parents=True, exist_ok=True)  # as in a tree (providers.json goes there)
    tp = TurnProviders(home, "loop-1", source=ConfigSource(home, GeodeConfig.from_raw))
    assert tp.live is not None
    resolved: list[str | None] = []
    get = tp.live.get

    def counted(model: str | None) -> Any:
        resolved.append(model)
        return get(model)

    tp.live.get = counted  # type: ignore[method-assign]
    return tp, resolved


def _view(tp: TurnProviders) -> dict[str, Any]:
    assert tp.live is not None
    return json.loads((tp.live.home.run_dir / STATUS_FILE).read_text())


def test_ten_turns_of_one_model_resolve_it_once(providers: tuple[TurnProviders, list[str | None]]) -> None:
    tp, resolved = providers
    first = tp.get(MODEL)
    assert all(tp.get(MODEL) is first for _ in range(9))
    assert resolved == [MODEL], f"{len(resolved)} resolutions for 10 turns of one model (one a turn before)"
    assert _view(tp)["model"] == MODEL


def test_an_environment_change_or_another_model_resolves_again(
    providers: tuple[TurnProviders, list[str | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    tp, resolved = providers
    first = tp.get(MODEL)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-second")  # another key: another client
    second = tp.get(MODEL)
    assert second is not first
    assert tp.get(MODEL) is second
    assert getattr(tp.get("gpt-5.5"), "model", None) == "gpt-5.5"
    assert _view(tp)["model"] == "gpt-5.5"
    assert tp.get(MODEL) is second
    assert resolved == [MODEL, MODEL, "gpt-5.5", MODEL]


def test_a_reload_resolves_again(providers: tuple[TurnProviders, list[str | None]]) -> None:
    tp, resolved = providers
    assert tp.live is not None
    tp.get(MODEL)
    tp.live.source.reload()  # geode reload: a new snapshot and .env, even when the files say the same
    tp.get(MODEL)
    tp.get(MODEL)
    assert resolved == [MODEL, MODEL]


def test_a_changed_or_removed_providers_file_is_written_again(
    providers: tuple[TurnProviders, list[str | None]],
) -> None:
    tp, resolved = providers
    assert tp.live is not None
    path = tp.live.home.run_dir / STATUS_FILE
    tp.get(MODEL)
    path.unlink()
    tp.get(MODEL)
    assert _view(tp)["model"] == MODEL
    path.write_text(json.dumps({"model": "gpt-5.5"}))  # another worker's turn of another model
    tp.get(MODEL)
    assert _view(tp)["model"] == MODEL
    assert resolved == [MODEL]


def test_a_model_codex_can_serve_is_resolved_every_turn(
    providers: tuple[TurnProviders, list[str | None]],
) -> None:
    tp, resolved = providers
    for _ in range(3):
        tp.get("gpt-6-sol")  # openai or codex: whether the Codex login file exists decides
    assert resolved == ["gpt-6-sol"] * 3
