"""One config source (issue 28 item 2): only geode/config_source.py and geode/config_file.py read config.toml,
no reader takes the raw file as a ``Mapping``/``dict`` config parameter, the ``GEODE_*`` variables that
override a setting are the documented ones, and a child's snapshot changes only through ``geode reload``."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.tree.config_sections import TreeSettings
from actors.tree.registry import ChildContext
from geode.config_file import remember_good
from geode.config_schema import GeodeConfig
from geode.config_source import ConfigSource
from geode.home import GeodeHome
from geode.protocol.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
SOURCE, FILE = "geode/config_source.py", "geode/config_file.py"
# readers of the file the config-file module offers, and who may call them: the source, and the check
# (``geode reload``/``doctor``/``serve`` validate the file as saved, through geode.config_file)
FILE_READERS = {"read_config", "serving", "last_good"}
MAY_READ = {SOURCE, FILE, "geode/config_check.py"}
RAW_BYTES = "geode/config_bytes.py"  # compares and scans the bytes for the CLI, never parses them
# scenario files of the scripted provider (TOML too, never config.toml)
TOML_ELSEWHERE = {"geode/testing/scenario.py"}
OVERRIDES = {"GEODE_MODEL", "GEODE_MCP_TOKEN"}  # docs/runtime.md, Configuration: Precedence


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for top in ("geode", "actors"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            yield rel, ast.parse(path.read_text(encoding="utf-8"), rel)


def _called(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _from_file_module(tree: ast.Module) -> set[str]:
    """The names a module imports from geode.config_file (``serving`` elsewhere may be another function)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "geode.config_file":
            out |= {a.asname or a.name for a in node.names}
    return out


def test_only_the_source_and_the_file_module_read_config_toml() -> None:
    found: list[str] = []
    for rel, tree in _modules():
        readers = _from_file_module(tree) & FILE_READERS
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names]
                names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                if "tomllib" in names and rel not in {FILE, *TOML_ELSEWHERE}:
                    found.append(f"{rel}:{node.lineno}: imports tomllib (parse through geode.config_file)")
            if not isinstance(node, ast.Call):
                continue
            name = _called(node)
            if name in readers and rel not in MAY_READ:
                found.append(f"{rel}:{node.lineno}: {name}() reads config.toml (take the source's snapshot)")
            if name in {"load_config", "from_home"}:
                found.append(f"{rel}:{node.lineno}: {name}() (gone: take the snapshot or its section)")
            f = node.func
            reads = name in {"read_text", "read_bytes", "open"} and isinstance(f, ast.Attribute)
            if reads and "config_file" in ast.unparse(f.value) and rel not in {SOURCE, FILE, RAW_BYTES}:
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert found == [], "\n".join(found)


def _config_params(tree: ast.Module) -> Iterator[tuple[int, str, str]]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                note = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                yield arg.lineno, arg.arg, note
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):  # dataclass fields
            if node.target.id == "global_config":
                yield node.lineno, node.target.id, ast.unparse(node.annotation)


def test_no_reader_takes_the_raw_file_as_a_config_parameter() -> None:
    found = []
    for rel, tree in _modules():  # geode/sessions included: the mode table takes the snapshot too
        for line, name, note in _config_params(tree):
            raw = re.search(r"\b(Mapping|dict)\b", note) is not None
            if name == "global_config" or ("config" in name.lower() and raw):
                found.append(f"{rel}:{line}: {name}: {note or '(no annotation)'}")
            if re.search(r"\b(GeodeConfig|TreeSettings)\b", note) and raw:
                found.append(f"{rel}:{line}: {name}: {note} (a union with the raw file)")
    assert found == [], "\n".join(found)


def test_the_geode_variables_that_override_settings_are_the_documented_ones() -> None:
    docs = (ROOT / "docs" / "runtime.md").read_text(encoding="utf-8")
    precedence = docs[docs.index("* **Precedence.**") :].split("\n* **", 1)[0]
    assert all(f"`{v}`" in precedence for v in OVERRIDES), precedence
    settings_modules = [*(ROOT / "geode").rglob("settings.py"), ROOT / "geode" / "config_schema.py"]
    named = {m for p in settings_modules for m in re.findall(r"GEODE_[A-Z_]+", p.read_text(encoding="utf-8"))}
    assert named <= OVERRIDES | {"GEODE_HOME"}, named  # a section documenting an override names it here too
    selection = (ROOT / "geode" / "providers" / "selection.py").read_text(encoding="utf-8")
    assert set(re.findall(r"GEODE_[A-Z_]+", selection)) == {"GEODE_HOME", "GEODE_MODEL"}


@pytest.fixture
def home(tmp_path: Path) -> GeodeHome:
    return GeodeHome(tmp_path / "gh").ensure()


def test_a_childs_snapshot_changes_only_through_reload(home: GeodeHome) -> None:
    first = b"[loop]\nmax_rounds = 7\n"
    home.config_file.write_bytes(first)
    home.env_file.write_text("TELEGRAM_BOT_TOKEN=one\n")
    remember_good(home, first)  # what `geode serve` keeps after its check: the tree's copy
    ctx = ChildContext("loop-1", 1, home)
    assert ctx.settings.loop.max_rounds == 7 and ctx.source.env["TELEGRAM_BOT_TOKEN"] == "one"

    second = b"[loop]\nmax_rounds = 3\n"
    home.config_file.write_bytes(second)  # saved, not reloaded
    home.env_file.write_text("TELEGRAM_BOT_TOKEN=two\n")
    assert ctx.settings.loop.max_rounds == 7 and ctx.source.env["TELEGRAM_BOT_TOKEN"] == "one"
    assert not ctx.source.changed()
    restarted = ChildContext("loop-1", 2, home)  # a child (re)started now starts on the tree's copy too
    assert restarted.settings.loop.max_rounds == 7

    remember_good(home, second)  # `geode reload` after its check
    assert ctx.source.changed() and ctx.settings.loop.max_rounds == 7  # until the child applies it
    ctx.source.reload()
    assert ctx.settings.loop.max_rounds == 3 and ctx.source.env["TELEGRAM_BOT_TOKEN"] == "two"


@pytest.mark.parametrize(
    "bad, what",
    [
        (b"[loop\n", "invalid TOML"),
        (b"[loop]\nmax_rounds = -1\n", "[loop] max_rounds"),
        (b"\xff\n", "not UTF-8"),
    ],
)
def test_a_bad_file_on_reload_keeps_the_old_snapshot_with_one_line(
    home: GeodeHome, bad: bytes, what: str
) -> None:
    home.config_file.write_bytes(b'[providers]\nmodel = "claude-opus-5"\n')
    source = ConfigSource(home, GeodeConfig.from_raw)  # outside a tree (a CLI command): the file itself
    before = source.snapshot
    home.config_file.write_bytes(bad)
    with pytest.raises(ConfigError) as err:
        source.reload()
    line = err.value.message or str(err.value)
    assert what in line and str(home.config_file) in line and "\n" not in line, line
    assert source.snapshot is before and source.snapshot.providers.model == "claude-opus-5"
    with pytest.raises(ConfigError, match=re.escape(what)):  # a child starting on it with no tree copy
        ConfigSource(home, TreeSettings.from_raw, tree=True)
    remember_good(home, b"[loop]\nmax_rounds = 2\n")  # with one, a (re)started child starts on that copy
    assert ConfigSource(home, TreeSettings.from_raw, tree=True).snapshot.loop.max_rounds == 2
    assert ConfigSource(home, GeodeConfig.from_raw).snapshot.loop.max_rounds == 2  # and a CLI command too
