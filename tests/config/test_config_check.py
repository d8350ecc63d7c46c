"""The start-up config check: the shipped file passes; bad TOML, unknown sections, wrong types refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.tree.config_sections import SCHEMAS, check_home_config
from geode.config_check import ConfigReport, check_config, known_fields
from geode.home import GeodeHome
from tests.config.config_kit import SHIPPED, uncommented, uncommented_text


def _home(tmp_path: Path, text: str | None) -> GeodeHome:
    home = GeodeHome(tmp_path / "gh")
    home.root.mkdir()
    if text is not None:
        home.config_file.write_text(text)
    return home


def _check(cfg: dict[str, object]) -> ConfigReport:
    return check_config(ConfigReport(Path("/h/config.toml"), cfg), schemas=SCHEMAS)


def test_shipped_file_is_a_valid_no_op(tmp_path: Path) -> None:
    report = check_home_config(_home(tmp_path, SHIPPED.read_text()))
    assert report.ok and report.warnings == []
    assert all(v == {} for v in report.config.values())  # every key is commented out


def test_every_documented_default_is_accepted_without_warnings(tmp_path: Path) -> None:
    report = check_home_config(_home(tmp_path, uncommented_text()))
    assert report.errors == [] and report.warnings == []
    assert report.config["loop"]["workers"] == 2 and report.config["store"]["map_size_mb"] == 256


def test_every_key_the_schemas_know_is_documented() -> None:
    text, cfg = SHIPPED.read_text(), uncommented()
    for section, schemas in SCHEMAS.items():
        assert f"[{section}" in text or f"{section}." in text, section
        for schema in schemas:
            for key in known_fields(schema):
                spelled = (f"{key} ", f'"{key}"', f".{key}")
                documented = key in (cfg.get(section) or {}) or any(s in text for s in spelled)
                assert documented, f"[{section}] {key} is read by the code but not in config/geode.toml"


def test_absent_file_is_the_default_config(tmp_path: Path) -> None:
    report = check_home_config(_home(tmp_path, None))
    assert report.ok and report.config == {}


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    home = _home(tmp_path, "[loop\nworkers = 2\n")
    report = check_home_config(home)
    assert len(report.errors) == 1
    assert str(home.config_file) in report.errors[0] and "invalid TOML" in report.errors[0]


def test_unknown_section_names_it_and_the_valid_ones() -> None:
    (line,) = _check({"lopp": {"workers": 2}}).errors
    assert "unknown section [lopp]" in line and "/h/config.toml" in line
    assert "valid sections: bus, control," in line and "loop" in line


@pytest.mark.parametrize(
    ("cfg", "needle"),
    [
        ({"loop": {"workers": "two"}}, "[loop] workers"),
        ({"loop": {"workers": 0}}, "[loop] workers"),
        ({"loop": {"max_rounds": 1.5}}, "[loop] max_rounds"),
        ({"store": {"map_size_mb": "big"}}, "[store] map_size_mb"),
        ({"supervisor": {"intensity": "ten"}}, "[supervisor] intensity"),
        ({"supervisor": {"strategy": "all_for_one"}}, "[supervisor] strategy"),
        ({"supervisor": {"children": {"store": {"restart": "always"}}}}, "children.store.restart"),
        ({"lanes": {"handlers": "many"}}, "[lanes] handlers"),
        ({"control": {"idle_timeout_s": "soon"}}, "[control] idle_timeout_s"),
        ({"tools": {"bash": {"fsize_bytes": "1M"}}}, "[tools] bash.fsize_bytes"),
        ({"tools": {"roots": "/tmp"}}, "[tools] roots"),
        ({"providers": {"timeout_s": "long"}}, "[providers] timeout_s"),
        ({"providers": {"retry": {"max_attempts": "3x"}}}, "[providers] retry.max_attempts"),
        ({"providers": {"anthropic": {"wire": "smoke-signals"}}}, "[providers] anthropic.wire"),
        ({"gateway": {"allow_computer_use": "yes"}}, "[gateway] allow_computer_use"),
        ({"verify": {"repair_budget": -1}}, "[verify] repair_budget"),
        ({"bus": {"workers": "four"}}, "[bus] workers"),
        ({"log": {"level": "LOUD"}}, "[log] level"),
        ({"model": 7}, "model: must be a string"),
        ({"loop": 3}, "loop must be a table"),
        ({"hooks": {"PreToolUse": [{"command": "x", "when": 1}]}}, "hooks.PreToolUse[0]"),
        ({"mcp": {"servers": {"fs": {"args": []}}}}, "mcp.servers.fs"),
    ],
)
def test_wrong_values_are_one_clear_line_each(cfg: dict[str, object], needle: str) -> None:
    errors = _check(cfg).errors
    assert len(errors) == 1, errors
    assert needle in errors[0] and errors[0].startswith("/h/config.toml: ")


def test_a_type_error_names_the_fix() -> None:
    (line,) = _check({"loop": {"workers": "two"}}).errors
    assert "got 'two'" in line and "fix:" in line and "workers = 2" in line


def test_unknown_keys_in_known_sections_are_warnings() -> None:
    report = _check({"loop": {"worker": 3}, "tools": {"bash": {"cpu": 1}}, "providers": {"antropic": {}}})
    assert report.ok
    assert any("[loop] worker: unknown key" in w for w in report.warnings)
    assert any("[tools.bash] cpu: unknown key" in w for w in report.warnings)
    assert any("[providers] antropic: unknown key" in w for w in report.warnings)
