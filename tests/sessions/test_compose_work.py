"""Work a turn's composition does (count guard, not time): ``compose_turn`` (settings, memory block, skill
cards) and the two system prompts of a one-tool-round turn, in Python calls; and what a user sees when a
skill is installed between two turns (the home's skills folder created then: the next turn lists it)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from actors.tree.config_sections import TreeSettings
from geode.home import GeodeHome
from geode.prompt import build_system_prompt
from geode.protocol import turns
from geode.sessions.factory import create_session
from geode.sessions.turn_setup import ComposedTurn, compose_turn
from geode.tools.plan import BoundToolPlan, PlanRegistry
from geode.tools.spec import SafetyPolicy, ToolSpec

# Measured 349-353 (LOOP2, session 7: the stat paths joined once, the [loop] base once per snapshot, a missing
# home skills folder not resolved, the model's window validated with the settings); 527 before. Deterministic
# for a given pydantic (no timing, no threads).
CALLS_CEILING = 385
# CPython 3.12 counts 457-473 for the same work: its pathlib makes a path in more Python calls (__init__,
# __new__, _load_parts, _parse_path for what 3.11 did in _from_parts / _parse_args), and the profile hook sees
# more C calls (isinstance, len, str methods) than 3.11's did
if sys.version_info >= (3, 12):
    CALLS_CEILING = 500


def _setup(tmp_path: Path) -> tuple[GeodeHome, Any, BoundToolPlan, turns.TurnRun, Path]:
    home = GeodeHome(tmp_path / "h").ensure()
    ws = tmp_path / "ws"
    ws.mkdir()
    home.rules_dir.mkdir(exist_ok=True)
    (home.rules_dir / "a.md").write_text("rule a")
    (home.root / "memory").mkdir(exist_ok=True)
    (home.root / "memory" / "MEMORY.md").write_text("- a note\n")
    config = TreeSettings.from_raw({})
    names = ("read_file", "use_skill", "glob_files")
    specs = [ToolSpec(name=n, description=n, handler=f"builtin:{n}", policy=SafetyPolicy()) for n in names]
    plan = PlanRegistry().compile(specs)
    spec = create_session("IPC", home=home, env={}, workspace=ws, plan=plan, config=config)
    settings = {**spec.turn_settings("s1"), "scope": "operator"}
    run = turns.TurnRun(turn_id="t1", session_id="s1", mode="IPC", settings=settings)
    return home, config, plan, run, ws


def _turn(home: GeodeHome, config: Any, plan: BoundToolPlan, run: turns.TurnRun) -> ComposedTurn:
    composed = compose_turn(run, config, catalogue=plan, rules_dir=home.rules_dir, plan_for=lambda c, s: plan)
    for _ in range(2):  # a one-tool-round turn: two model calls
        build_system_prompt(composed.prompt, model=composed.settings.model, provider="anthropic")
    return composed


def test_a_turns_composition_and_prompts_stay_under_their_python_calls(tmp_path: Path) -> None:
    home, config, plan, run, _ = _setup(tmp_path)
    first = _turn(home, config, plan, run)  # caches primed, as on a worker's second turn
    assert "a note" in first.prompt.memory and first.prompt.skills == []
    calls = [0]

    def count(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            calls[0] += 1

    sys.setprofile(count)
    try:
        again = _turn(home, config, plan, run)
    finally:
        sys.setprofile(None)
    assert again.settings == first.settings and again.prompt == first.prompt
    assert calls[0] <= CALLS_CEILING, calls[0]


def test_a_skill_or_memory_added_between_two_turns_is_in_the_next(tmp_path: Path) -> None:
    home, config, plan, run, _ = _setup(tmp_path)
    before = _turn(home, config, plan, run)
    assert before.prompt.skills == []
    folder = home.root / "skills" / "greet"  # the home's skills folder did not exist at the first turn
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: greet\ndescription: says hello\n---\nSay hello.\n")
    (home.root / "memory" / "MEMORY.md").write_text("- a note\n- another note\n")
    after = _turn(home, config, plan, run)
    assert after.prompt.skills == [("greet", "says hello")]
    assert "another note" in after.prompt.memory
    system = build_system_prompt(after.prompt, model=after.settings.model)
    assert any("greet" in s.text for s in system)


def test_a_turns_context_window_is_its_models_unless_set(tmp_path: Path) -> None:
    """The model's catalogue window (now validated with the other settings, no copy after): an OpenAI
    model's 400k; ``[loop] context_window_tokens`` or the turn's own value wins; an unknown model routed to
    Anthropic keeps the default; no model, the default."""
    from geode.sessions.turn_setup import turn_settings

    def window(settings: dict[str, Any], raw: dict[str, Any] | None = None) -> int:
        run = turns.TurnRun(turn_id="t", session_id="s", mode="IPC", settings=settings)
        got = turn_settings(run, TreeSettings.from_raw(raw or {}))
        assert got.model == settings.get("model", got.model)
        return got.context_window_tokens

    assert window({"model": "gpt-5", "workspace": str(tmp_path)}) == 400_000
    assert window({"model": "gpt-5"}, {"loop": {"context_window_tokens": 50_000}}) == 50_000
    assert window({"model": "gpt-5", "context_window_tokens": 60_000}) == 60_000
    assert window({"model": "claude-unknown-x"}) == 200_000
    assert window({"model": ""}) == 200_000
