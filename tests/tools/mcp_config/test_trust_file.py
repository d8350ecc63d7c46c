"""``[trust] projects`` edited in the global config: idempotent, the rest of the file kept byte for byte."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from actors.tree.config_sections import check_home_config
from geode.home import GeodeHome
from geode.protocol.errors import ConfigError
from geode.tools.mcp.trust import read_trust_list, trust_add, trust_remove

ROOT = Path(__file__).resolve().parents[3]


def _dirs(tmp_path: Path, *names: str) -> list[Path]:
    out = []
    for n in names:
        (tmp_path / n).mkdir()
        out.append((tmp_path / n).resolve())
    return out


def test_absent_file_is_created_and_add_list_remove_are_idempotent(tmp_path: Path) -> None:
    cfg = tmp_path / "home" / "config.toml"
    a, b = _dirs(tmp_path, "a", "b")
    assert read_trust_list(cfg) == []
    assert trust_add(cfg, a) == (a, True)
    assert trust_add(cfg, str(a) + "/") == (a, False)  # same directory, spelled differently
    assert trust_add(cfg, b) == (b, True)
    assert read_trust_list(cfg) == [str(a), str(b)]
    assert os.stat(cfg).st_mode & 0o777 == 0o600
    assert trust_remove(cfg, a) == (a, True)
    assert trust_remove(cfg, a) == (a, False)
    assert read_trust_list(cfg) == [str(b)]
    assert trust_remove(cfg, b) == (b, True)
    assert tomllib.loads(cfg.read_text()) == {"trust": {"projects": []}}


def test_the_shipped_config_keeps_every_other_byte(tmp_path: Path) -> None:
    """A user's config.toml copied from config/geode.toml (comments, [trust] header) survives add + remove."""
    shipped = (ROOT / "config" / "geode.toml").read_text()
    cfg = tmp_path / "config.toml"
    cfg.write_text(shipped)
    [proj] = _dirs(tmp_path, "proj")
    trust_add(cfg, proj)
    text = cfg.read_text()
    assert read_trust_list(cfg) == [str(proj)]
    assert text.replace(f'projects = [\n    "{proj}",\n]\n', "", 1) == shipped  # only the new key was added
    report = check_home_config(GeodeHome(tmp_path))  # `geode serve` would start with it
    assert report.ok and not report.warnings, (report.errors, report.warnings)
    trust_remove(cfg, proj)
    assert cfg.read_text() == shipped.replace("[trust]\n", "[trust]\nprojects = []\n", 1)


def test_existing_array_with_comments_and_later_sections(tmp_path: Path) -> None:
    a, b = _dirs(tmp_path, "a", "b")
    cfg = tmp_path / "config.toml"
    before = (
        '# my settings\nmodel = "m"  # keep me\n\n'
        f'[trust]  # trusted\nprojects = [ "{a}", # first\n  "/x]y" ]  # tail comment\nother = 1\n\n'
        '[mcp.servers.g]\ncommand = "g"  # [trust] not a header\n'
    )
    cfg.write_text(before)
    trust_add(cfg, b)
    after = cfg.read_text()
    assert after.startswith('# my settings\nmodel = "m"  # keep me\n\n[trust]  # trusted\n')
    assert after.endswith(
        '  # tail comment\nother = 1\n\n[mcp.servers.g]\ncommand = "g"  # [trust] not a header\n'
    )
    data = tomllib.loads(after)
    assert data["trust"] == {"projects": [str(a), "/x]y", str(b)], "other": 1}
    assert data["mcp"] == {"servers": {"g": {"command": "g"}}} and data["model"] == "m"
    assert trust_remove(cfg, "/x]y")[1] is True  # an entry as written, even if it is no directory
    assert read_trust_list(cfg) == [str(a), str(b)]


def test_no_trust_table_appends_one_at_the_end(tmp_path: Path) -> None:
    [a] = _dirs(tmp_path, "a")
    cfg = tmp_path / "config.toml"
    cfg.write_text('[loop]\nmax_rounds = 3\n[mcp.servers.g]\ncommand = "g"')  # no final newline
    trust_add(cfg, a)
    assert (
        cfg.read_text()
        == f'[loop]\nmax_rounds = 3\n[mcp.servers.g]\ncommand = "g"\n\n[trust]\nprojects = [\n    "{a}",\n]\n'
    )


def test_unusual_forms_are_refused_with_the_line_to_write_and_the_file_untouched(tmp_path: Path) -> None:
    [a] = _dirs(tmp_path, "a")
    cfg = tmp_path / "config.toml"
    for text in ('trust.projects = ["/p"]\n', 'trust = { projects = ["/p"] }\n', "[trust]\nprojects = 'x'\n"):
        cfg.write_text(text)
        with pytest.raises(ConfigError, match=r"by hand|must be a list"):
            trust_add(cfg, a)
        assert cfg.read_text() == text
    cfg.write_text("[loop\n")
    with pytest.raises(ConfigError, match="cannot read"):
        trust_add(cfg, a)
    with pytest.raises(ConfigError, match="not a directory"):
        trust_add(tmp_path / "other.toml", tmp_path / "missing")


def test_concurrent_adds_are_all_kept(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    cfg = tmp_path / "home" / "config.toml"
    dirs = _dirs(tmp_path, *(f"p{i}" for i in range(12)))
    with ThreadPoolExecutor(max_workers=6) as pool:
        assert all(changed for _p, changed in pool.map(lambda d: trust_add(cfg, d), dirs))
    assert sorted(read_trust_list(cfg)) == sorted(str(d) for d in dirs)
