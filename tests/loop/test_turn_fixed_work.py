"""A turn's fixed work in a worker that runs many sessions: what one session's turn costs does not grow with
the other sessions' histories the process keeps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

from geode.providers.identity_memo import common_prefix


class _Counted(Sequence[Any]):
    """A sequence that counts the items read from it."""

    def __init__(self, items: list[Any]) -> None:
        self.items, self.reads = items, 0

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Any]: ...
    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            self.reads += len(self.items[i])
            return self.items[i]
        self.reads += 1
        return self.items[i]


def test_another_sessions_list_is_told_apart_by_its_first_item_not_walked() -> None:
    mine, theirs = [object() for _ in range(300)], [object() for _ in range(400)]
    a, b = _Counted(mine), _Counted(theirs)
    assert common_prefix(a, b) == 0
    assert a.reads + b.reads <= 4  # was 2 x 300: a fold keeps the lists of several sessions
    assert common_prefix(mine, theirs) == 0 and common_prefix(theirs, mine) == 0
    # a list of the same session is still compared item by item: the shared head is counted exactly
    changed = [*mine[:120], object(), *mine[121:]]
    assert common_prefix(mine, changed) == 120 and common_prefix(changed, mine) == 120
    assert common_prefix(mine, [*mine, object()]) == 300
    assert common_prefix([], theirs) == 0 and common_prefix(mine, []) == 0


def test_the_system_prompt_is_built_again_only_when_its_sources_changed(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """Each model call of a turn builds the system prompt: the same sources give the very same sections (no
    file read, no section rebuilt); a rules file added, edited or shadowed by the project is in the next."""
    from pathlib import Path

    from geode.prompt import PromptSources, build_system_prompt

    ws, home_rules = tmp_path / "ws", tmp_path / "rules"
    ws.mkdir()
    home_rules.mkdir()
    (home_rules / "a.md").write_text("home rule a")
    reads: list[str] = []
    real = Path.read_text

    def counted(self: Path, *a: Any, **kw: Any) -> str:
        reads.append(self.name)
        return real(self, *a, **kw)

    monkeypatch.setattr(Path, "read_text", counted)
    src = PromptSources(workspace=ws, home_rules=home_rules)
    hints = {"execution_budget": "", "verification_continuation": ""}
    first = build_system_prompt(src, model="m", provider="p", hints=hints)
    reads.clear()
    for _ in range(5):
        again = build_system_prompt(src, model="m", provider="p", hints=hints)
        assert all(x is y for x, y in zip(again, first, strict=True))
    assert reads == []
    assert "wrap up" in build_system_prompt(src, model="m", hints={"execution_budget": "wrap up"})[-1].text
    (home_rules / "b.md").write_text("home rule b")
    assert "home rule b" in build_system_prompt(src, model="m", provider="p", hints=hints)[1].text
    (home_rules / "a.md").write_text("home rule a, edited")
    assert "rule a, edited" in build_system_prompt(src, model="m", provider="p", hints=hints)[1].text
    (ws / ".geode" / "rules").mkdir(parents=True)
    (ws / ".geode" / "rules" / "a.md").write_text("project rule a")
    text = build_system_prompt(src, model="m", provider="p", hints=hints)[1].text
    assert "project rule a" in text and "home rule a" not in text and "home rule b" in text
    (ws / "GEODE.md").write_text("## Project\nproject guidance\n")
    assert "project guidance" in build_system_prompt(src, model="m", provider="p", hints=hints)[0].text


def test_a_worker_serving_more_sessions_than_it_runs_at_once_opens_each_from_its_own_copy(
    fake_rig: Any, monkeypatch: Any
) -> None:
    """Lanes sends a session back to its last worker, so a worker serves many sessions in turn. Before: it
    kept the last saves of 8; the 9th session's next turn read its whole history from the store (every
    message validated, measured and encoded again: 14.5 instead of 4.8 ms CPU a turn at 10 sessions)."""
    from geode.loop.settings import LoopSettings
    from geode.protocol import store as m

    sessions = [f"many-{i}" for i in range(12)]
    loop = fake_rig.loop(fake_rig.script(*["ok"] * 36), settings=LoopSettings(model="test-model"))
    for turn in (1, 2):  # the second learns each session's creation time from the store
        for s in sessions:
            assert loop.run_turn(s, f"{s}-t{turn}", f"prompt {turn}").text == "ok"
    calls: list[str] = []
    client = fake_rig.records.inner
    inner = client._call

    def call(type_: str, body: Any, **kw: Any) -> Any:
        calls.append(type_)
        return inner(type_, body, **kw)

    monkeypatch.setattr(client, "_call", call)
    for s in sessions:
        assert loop.run_turn(s, f"{s}-t3", "prompt 3").text == "ok"
    assert m.CHECKPOINT_LOAD not in calls
    assert calls.count(m.CHECKPOINT_SAVE) == 2 * len(sessions)


def test_what_a_process_keeps_is_bounded_by_sessions_and_messages(monkeypatch: Any) -> None:
    from geode.conversation import Message, TextBlock
    from geode.loop import checkpoint

    monkeypatch.setattr(checkpoint, "_kept", type(checkpoint._kept)())
    monkeypatch.setattr(checkpoint, "_kept_messages", [0])
    monkeypatch.setattr(checkpoint, "KEPT_SESSIONS", 4)
    monkeypatch.setattr(checkpoint, "KEPT_MESSAGES", 10)
    msg = Message(role="user", content=(TextBlock(text="x"),))
    for i in range(6):
        checkpoint._keep(f"s{i}", checkpoint.Kept(1.0, 1, (msg,) * 2))
    assert list(checkpoint._kept) == ["s2", "s3", "s4", "s5"]  # the 4 most recently saved
    checkpoint._keep("big", checkpoint.Kept(1.0, 1, (msg,) * 7))
    assert list(checkpoint._kept) == ["s5", "big"] and checkpoint._kept_messages == [9]
    checkpoint._keep("bigger", checkpoint.Kept(1.0, 1, (msg,) * 30))
    assert list(checkpoint._kept) == ["bigger"]  # the most recent is kept whatever its size
    checkpoint._keep("bigger", None)
    assert not checkpoint._kept and checkpoint._kept_messages == [0]
