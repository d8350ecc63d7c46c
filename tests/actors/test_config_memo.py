"""The tree's config validated once in the zygote and reused by its forks (``actors/tree/config_memo.py``): a
child whose file parses to the same document gets the zygote's snapshot; any other document (a reload's new
file, a value of another type) is validated in the child as before, errors included."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.tree import config_memo
from actors.tree.config_sections import TreeSettings
from geode.config_file import last_good_path, parse_config
from geode.config_source import ConfigSource
from geode.home import GeodeHome
from geode.protocol.errors import ConfigError

GOOD = b'[providers]\nmodel = "claude-sonnet-5"\n[lanes]\nsession_queue_max = 4\n'


@pytest.fixture
def home(tmp_path: Path) -> Iterator[GeodeHome]:
    h = GeodeHome(tmp_path / "gh").ensure()
    last_good_path(h).parent.mkdir(parents=True, exist_ok=True)
    last_good_path(h).write_bytes(GOOD)
    saved, config_memo._memo = config_memo._memo, None
    yield h
    config_memo._memo = saved


def test_a_child_reuses_the_zygotes_snapshot_of_the_same_file(home: GeodeHome) -> None:
    assert config_memo.prepare(home)
    assert not config_memo.prepare(home)  # the same bytes at the next fork: kept, not validated again
    zygote_snapshot = config_memo._memo[2] if config_memo._memo else None
    before = config_memo.reused
    source = ConfigSource(home, config_memo.build, tree=True)  # what child_main builds
    assert source.snapshot is zygote_snapshot
    assert config_memo.reused == before + 1
    assert source.snapshot == TreeSettings.from_raw(parse_config(GOOD, "x"))


def test_another_document_is_validated_in_the_child(home: GeodeHome) -> None:
    assert config_memo.prepare(home)
    before = config_memo.reused
    last_good_path(home).write_bytes(GOOD.replace(b"= 4", b"= 5"))  # a reload's new copy after the fork
    source = ConfigSource(home, config_memo.build, tree=True)
    assert config_memo.reused == before
    assert (
        source.snapshot.model_dump()
        == TreeSettings.from_raw(parse_config(last_good_path(home).read_bytes(), "x")).model_dump()
    )
    assert source.snapshot.model_dump() != config_memo._memo[2].model_dump()  # type: ignore[index]


def test_the_same_values_of_another_type_are_not_the_same_document(home: GeodeHome) -> None:
    assert config_memo.prepare(home)
    doc = parse_config(GOOD, "x")
    assert config_memo.build(doc) is config_memo._memo[2]  # type: ignore[index]
    doc["lanes"]["session_queue_max"] = 4.0  # == 4 in Python, another TOML document
    other = {**doc, "lanes": {"session_queue_max": True}}
    assert not config_memo._same(doc, parse_config(GOOD, "x"))
    assert not config_memo._same(other, parse_config(GOOD, "x"))


def test_a_bad_file_is_left_to_the_child_which_reports_it(home: GeodeHome) -> None:
    last_good_path(home).write_bytes(b'[lanes]\nsession_queue_max = "many"\n')
    assert not config_memo.prepare(home)
    with pytest.raises(ConfigError):
        config_memo.build(parse_config(last_good_path(home).read_bytes(), "x"))
