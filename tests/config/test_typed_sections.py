"""Builders read the typed sections (``ctx.settings``), whose defaults live in the schema; a bad value is
refused at start with the schema's line."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from actors.bus.endpoints import Endpoints
from actors.bus.settings import BusSection
from actors.tree.children import child_names, tree_specs
from actors.tree.config_sections import SCHEMAS, TreeSettings, start_settings
from actors.tree.registry import ChildContext
from actors.tree.settings import LoopShellSection
from geode.config_check import known_fields
from geode.config_schema import DOMAIN_SCHEMAS, OPEN_SECTIONS, GeodeConfig
from geode.home import GeodeHome
from geode.protocol.errors import ConfigError
from geode.tools.builtin.bash import BashLimits
from geode.tools.settings import BashSection


@pytest.fixture
def home(tmp_path: Path) -> GeodeHome:
    return GeodeHome(tmp_path / "gh").ensure()


def test_an_empty_file_is_the_schemas_defaults(home: GeodeHome) -> None:
    ctx = ChildContext("executor", 1, home)
    assert ctx.settings == TreeSettings() and ctx.settings is ctx.settings  # one snapshot per source
    assert ctx.settings.tools.bash.fsize_bytes == BashLimits.fsize_bytes
    assert (ctx.settings.loop.workers, ctx.settings.loop.capacity, ctx.settings.loop.max_rounds) == (2, 2, 0)
    assert ctx.settings.supervisor.tree.intensity == 10 and ctx.settings.bus.workers == 4


def test_a_set_value_reaches_its_section_and_nothing_else(home: GeodeHome) -> None:
    raw = {"loop": {"max_rounds": 7, "workers": 3}, "tools": {"bash": {"fsize_bytes": 4096}}}
    home.config_file.write_text("[loop]\nmax_rounds = 7\nworkers = 3\n[tools.bash]\nfsize_bytes = 4096\n")
    s = ChildContext("loop-1", 1, home).settings
    assert (s.loop.max_rounds, s.loop.workers, s.tools.bash.fsize_bytes) == (7, 3, 4096)
    assert s.tools.bash.cpu_s == BashSection().cpu_s and s.loop.capacity == 2
    assert GeodeConfig.from_raw(raw).loop.max_rounds == 7  # the domain's view of the same [loop]


def test_the_tree_and_the_bus_are_built_from_the_typed_sections(home: GeodeHome) -> None:
    settings = TreeSettings(loop=LoopShellSection(workers=3), bus=BusSection(workers=7))
    assert child_names(settings)[3:6] == ["loop-1", "loop-2", "loop-3"]
    assert len(tree_specs(settings, python="py")) == 8
    assert Endpoints.from_config(home, bus=settings.bus).workers == 7


def test_the_executor_reads_its_typed_section(home: GeodeHome) -> None:
    from actors.executor import executor_from_config

    home.config_file.write_text(
        '[tools.bash]\nfsize_bytes = 4096\n[tools.web_fetch]\nallow_hosts = ["intranet.local"]\n'
    )
    ctx = ChildContext("executor", 1, home)
    bus: Any = SimpleNamespace(transport=None)
    ex = executor_from_config(bus, ctx)
    assert ex.services["bash_limits"].fsize_bytes == 4096
    assert ex.services["web_fetch"].names("intranet.local")


def test_the_loop_worker_bounds_turns_from_the_typed_loop_section() -> None:
    from geode.protocol import turns
    from geode.sessions.turn_setup import turn_settings

    settings = TreeSettings(loop=LoopShellSection(max_rounds=5, context_window_tokens=1000))
    run = turns.TurnRun(turn_id="t", session_id="s", mode="IPC", settings={"model": "claude-opus-5-5"})
    got = turn_settings(run, settings)
    assert (got.max_rounds, got.context_window_tokens) == (5, 1000)


def test_a_wrong_type_is_refused_at_start_with_the_schemas_line(home: GeodeHome) -> None:
    home.config_file.write_text('[lanes]\nsession_queue_max = "many"\n')
    err = io.StringIO()
    settings, report = start_settings(home, prog="geode serve", err=err)
    assert settings is None and not report.ok
    first = err.getvalue().splitlines()[0]
    assert first.startswith(f"geode serve: {home.config_file}: [lanes] session_queue_max: Input should be")
    assert "(got 'many')" in first and "default session_queue_max = " in first
    with pytest.raises(ConfigError, match=r"\[lanes\] session_queue_max: Input should be a valid integer"):
        ChildContext("lanes", 1, home).settings  # noqa: B018


def test_every_checked_section_is_a_typed_attribute() -> None:
    fields = TreeSettings.model_fields
    for section, schemas in SCHEMAS.items():
        field = next(f for n, f in fields.items() if (f.alias or n) == section)  # every section is a field
        if not schemas:
            continue  # mcpServers: a typed table of entries (McpJsonServer), checked by its loader
        typed = field.annotation
        assert isinstance(typed, type), section
        for schema in schemas:  # the typed section reads every key the check knows
            assert known_fields(schema) <= known_fields(typed), (section, schema)
    assert set(DOMAIN_SCHEMAS) - OPEN_SECTIONS <= set(GeodeConfig.model_fields)
