"""A child's side of `geode reload` (actors/tree/reload_rule.py), in-process: each child diffs against what it
last applied (so two children sharing one source, as in --single-process, both apply the change), a re-sent
stamp is only confirmed again, a child that needs a restart asks for it and does not confirm, and a failing
apply keeps the child serving and names the error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.tree.config_sections import TreeSettings
from actors.tree.registry import ChildContext
from actors.tree.reload_rule import ChildReload
from geode.config_file import remember_good
from geode.config_reload import LOOP, MESSENGERS, ConfigChange
from geode.config_source import ConfigSource
from geode.home import GeodeHome


class Hosted:
    def __init__(self, answer: Any = None, fail: bool = False) -> None:
        self.seen: list[ConfigChange] = []
        self.answer, self.fail = answer, fail

    def apply_config(self, change: ConfigChange, settings: TreeSettings) -> list[str] | None:
        if self.fail:
            raise RuntimeError("the hub would not start")
        self.seen.append(change)
        return None if MESSENGERS in change.areas else list(self.answer or ["applied"])


def _home(tmp_path: Path, text: str) -> GeodeHome:
    home = GeodeHome(tmp_path / "gh").ensure()
    home.config_file.write_text(text)
    remember_good(home, text.encode())
    return home


def test_children_sharing_a_source_each_apply_once_and_a_restart_is_asked_not_confirmed(
    tmp_path: Path,
) -> None:
    home = _home(tmp_path, "[loop]\nmax_rounds = 10\n")
    source = ConfigSource(home, TreeSettings.from_raw, tree=True)
    loop, other = Hosted(), Hosted()
    restarts: list[str] = []
    rules = [
        ChildReload(ChildContext(n, 1, home, source), h, lambda n=n: restarts.append(n))  # type: ignore[misc]
        for n, h in (("loop-1", loop), ("loop-2", other))
    ]
    remember_good(home, b"[loop]\nmax_rounds = 5\n")
    confirmed = [r.apply("s1") for r in rules]
    assert [c.applied if c else None for c in confirmed] == [["applied"], ["applied"]]
    assert [c.areas for c in loop.seen + other.seen] == [frozenset({LOOP})] * 2
    again = rules[0].apply("s1")  # asked again (the CLI did not see the confirmation): not applied twice
    assert again is not None and again.applied == [] and len(loop.seen) == 1

    remember_good(
        home, b'[loop]\nmax_rounds = 5\n[[messengers.bindings]]\nplatform = "telegram"\nchannel_id = "1"\n'
    )
    assert rules[0].apply("s2") is None and restarts == ["loop-1"]  # restarting: its new incarnation counts


def test_a_failing_apply_names_the_error_and_is_tried_again_on_the_next_reload(tmp_path: Path) -> None:
    home = _home(tmp_path, "[verify]\njudge = false\n")
    hosted = Hosted(fail=True)
    rule = ChildReload(ChildContext("executor", 3, home), hosted, lambda: None)
    remember_good(home, b"[verify]\njudge = true\n")
    got = rule.apply("s1")
    assert got is not None and got.name == "executor" and got.incarnation == 3
    assert got.error == "RuntimeError: the hub would not start" and got.applied == []
    hosted.fail = False
    got = rule.apply("s2")  # what it failed to apply is still the difference
    assert got is not None and got.applied == ["applied"] and hosted.seen[0].areas == {LOOP}
