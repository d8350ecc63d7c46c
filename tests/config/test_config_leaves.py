"""Each area's section lives in a leaf (its ``settings.py``) that imports no working module; ``GeodeConfig``
and the shell's ``TreeSettings`` are exactly the leaves' sections; config/geode.toml documents every key of
every leaf (recursively), and a ``# key = value`` line there is that key's real default (issue 28 item 1)."""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
import tomllib
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticUndefined

from actors.tree.config_sections import TreeSettings
from geode.config_schema import GeodeConfig
from tests.config.config_kit import ROOT, SHIPPED

# leaves not named settings.py: the messengers' section (a pure module of models and their checks)
EXTRA_LEAVES = {"geode.messengers.config", "geode.messengers.discord_config", "geode.messengers.slack_config"}
# pure vocabulary a leaf may import besides other leaves: an enum, a model, an error class, a dataclass
VOCAB = {
    "geode.protocol.errors",
    "geode.providers.catalogue",
    "geode.hooks.events",
    "geode.tools.spec",
    "actors.tree.spec",
    "geode.schedule.jobs",  # the job model [[schedule.jobs]] entries are (cronsim loaded only to check one)
    "geode.schedule.occurrences",
    "geode.listen_address",  # parse "host:port" (re and ipaddress only)
}
PENDING: set[str] = set()  # leaves not assembled yet, each with its reason
THIRD_PARTY = {"pydantic", "pydantic_core", "typing_extensions"}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _defines_a_model(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(
        isinstance(n, ast.Assign | ast.ClassDef) and "BaseModel" in ast.dump(n) for n in tree.body
    ) or ("create_model(" in path.read_text())


def leaves() -> set[str]:
    """Every ``settings.py`` of geode/ and actors/ that defines a pydantic section, and the extra leaves."""
    found = {_module(p) for pkg in ("geode", "actors") for p in (ROOT / pkg).rglob("settings.py")}
    return {m for m in found if _defines_a_model(ROOT / (m.replace(".", "/") + ".py"))} | EXTRA_LEAVES


def _imports(module: str) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def _section_classes(model: type[BaseModel]) -> dict[str, type]:
    """Field name -> the section class (``X | None`` unwrapped) of a config model's top-level fields."""
    out = {}
    for name, f in model.model_fields.items():
        if name in ("model", "raw"):  # the top-level `model = "<id>"` and the file as read
            continue
        out[name] = _unwrap(f.annotation)
    return out


def _unwrap(ann: Any) -> Any:
    """``X | None`` -> ``X``; ``dict[str, X]`` (entries by name, ``mcpServers``) -> ``X``."""
    args = [a for a in typing.get_args(ann) if a is not type(None)]
    if typing.get_origin(ann) in (typing.Union, type(int | None)) and len(args) == 1:
        return args[0]
    return args[1] if typing.get_origin(ann) is dict and _is_model(args[1]) else ann


def test_the_leaves_are_the_settings_modules_and_none_is_forgotten() -> None:
    found = leaves()
    assert {"geode.control.settings", "geode.lanes.settings", "geode.tools.settings"} <= found
    assert {"geode.providers.settings", "geode.hooks.settings", "geode.tools.mcp.settings"} <= found
    assert {"geode.loop.settings", "actors.tree.settings", "actors.bus.settings"} <= found
    assert "geode.sessions.settings" not in found  # a turn's model choice, not a config section


def test_a_leaf_imports_only_leaves_and_pure_vocabulary() -> None:
    allowed = leaves() | VOCAB
    for leaf in sorted(leaves() - PENDING):
        for name in _imports(leaf):
            root = name.split(".")[0]
            if root in ("geode", "actors"):
                assert name in allowed, (
                    f"{leaf} imports {name}, a working module (move the default into a leaf)"
                )
            else:
                assert root in sys.stdlib_module_names or root in THIRD_PARTY, f"{leaf} imports {name}"


def test_importing_the_schema_and_the_shell_leaves_loads_only_leaves() -> None:
    """At run time too (package ``__init__`` files included): no working module is loaded, and no zmq."""
    code = (
        "import sys, geode.config_schema, actors.tree.settings, actors.bus.settings; "
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in ('geode', 'actors', 'zmq'))))"
    )
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout.split()
    )
    packages = {m for m in loaded if (ROOT / m.replace(".", "/") / "__init__.py").exists()}
    assert "geode.config_schema" in loaded and "geode.tools.settings" in loaded  # the probe ran
    assert loaded - packages - leaves() - VOCAB == {"geode.config_schema"}


def test_geode_config_fields_are_exactly_the_leaf_sections() -> None:
    """Every section field's class lives in a leaf, and every leaf contributes a section (the shell's leaves
    to ``TreeSettings``): a new settings.py that is not assembled, or a section defined elsewhere, fails."""
    domain = {name: cls.__module__ for name, cls in _section_classes(GeodeConfig).items()}
    tree = {name: cls.__module__ for name, cls in _section_classes(TreeSettings).items()}
    assert all(m.startswith("geode.") for m in domain.values()), domain  # the domain assembles no shell leaf
    for name, module in tree.items():
        assert module in leaves(), f"[{name}] is {module}, not a leaf: its model belongs in a settings.py"
    used = set(tree.values()) | {c.__module__ for c in _nested_models(TreeSettings)}
    assert leaves() - PENDING - used == set(), "leaves whose section is not assembled into the config"


def _nested_models(model: Any) -> Iterator[type]:
    seen: set[type] = set()
    todo = [model]
    while todo:
        cls = todo.pop()
        for f in _fields(cls):
            for sub in _models_in(f.annotation):
                if sub not in seen:
                    seen.add(sub)
                    todo.append(sub)
    yield from seen


def _models_in(ann: Any) -> Iterator[type]:
    if isinstance(ann, type) and (issubclass(ann, BaseModel) or dataclasses.is_dataclass(ann)):
        yield ann
    for arg in typing.get_args(ann):
        yield from _models_in(arg)


# -- config/geode.toml documents every key --------------------------------------------------------------

_HEADER = re.compile(r"^#{0,2} ?(\[\[?)([^\]\s]+(?: [^\]\s]+)*)\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"^(#{1,2}) ?([A-Za-z_][A-Za-z0-9_]*) = (.*)$")
UNPARSED = object()


@dataclasses.dataclass
class Doc:
    path: tuple[str, ...]
    key: str
    value: Any  # the parsed value, or UNPARSED (a computed default such as "<n>")
    example: bool  # a "##" line: prose or an example entry, never read as a default


def _split(path: str) -> tuple[str, ...]:
    return tuple(p.strip('"') for p in re.findall(r'"[^"]*"|[^.]+', path))


def documented() -> list[Doc]:
    out: list[Doc] = []
    path: tuple[str, ...] = ()
    for line in SHIPPED.read_text().splitlines():
        if (h := _HEADER.match(line)) is not None:
            path = _split(h.group(2))
            continue
        if (k := _KEY.match(line)) is not None:
            try:
                value = tomllib.loads(f"v = {k.group(3)}")["v"]
            except tomllib.TOMLDecodeError:
                value = UNPARSED
            out.append(Doc(path, k.group(2), value, k.group(1) == "##"))
    return out


@dataclasses.dataclass
class Key:
    path: tuple[str, ...]  # "*" where an entry's name goes ([mcp.servers.<name>])
    key: str
    annotation: Any
    default: Any  # PydanticUndefined when required


def _fields(cls: Any) -> list[Any]:
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return [
            _F(f.alias or n, f.annotation, f.get_default(call_default_factory=True))
            for n, f in cls.model_fields.items()
        ]
    hints = typing.get_type_hints(cls)
    return [
        _F(f.name, hints[f.name], f.default if f.default is not dataclasses.MISSING else PydanticUndefined)
        for f in dataclasses.fields(cls)
    ]


@dataclasses.dataclass
class _F:
    name: str
    annotation: Any
    default: Any


def keys_of(cls: Any, path: tuple[str, ...] = ()) -> Iterator[Key]:
    """Every key a config model reads, recursively: sub-tables by name, ``dict[str, Model]`` entries as
    ``*``, ``list[Model]`` arrays of tables as their own path."""
    for f in _fields(cls):
        if path == () and f.name == "raw":
            continue
        ann = _unwrap_optional(f.annotation)
        origin, args = typing.get_origin(ann), typing.get_args(ann)
        if isinstance(ann, type) and (issubclass(ann, BaseModel) or dataclasses.is_dataclass(ann)):
            yield from keys_of(ann, (*path, f.name))
        elif origin is dict and _is_model(args[1]):
            yield from keys_of(args[1], (*path, f.name, "*"))
        elif origin is list and args and _is_model(args[0]):
            yield from keys_of(args[0], (*path, f.name, "[]"))
        else:
            yield Key(path, f.name, f.annotation, f.default)


def _unwrap_optional(ann: Any) -> Any:
    args = [a for a in typing.get_args(ann) if a is not type(None)]
    return args[0] if typing.get_origin(ann) in (typing.Union, type(int | None)) and len(args) == 1 else ann


def _is_model(ann: Any) -> bool:
    return isinstance(ann, type) and (issubclass(ann, BaseModel) or dataclasses.is_dataclass(ann))


def _matches(wanted: tuple[str, ...], doc: tuple[str, ...]) -> bool:
    """``[a.<name>]`` documents every ``a.*`` entry (and ``a.b``); ``[[a.b]]`` the array ``a.b[]``."""
    wanted = tuple(w for w in wanted if w != "[]")
    return len(wanted) == len(doc) and all(
        w == d or d.startswith("<") for w, d in zip(wanted, doc, strict=True)
    )


def _concrete(path: tuple[str, ...]) -> bool:
    """A table read as is; keys inside entries (``*``) and arrays (``[]``) are shown by example."""
    return "*" not in path and "[]" not in path


ALL_KEYS = list(keys_of(TreeSettings))


def test_the_walk_reaches_nested_tables_entries_and_arrays() -> None:
    paths = {(k.path, k.key) for k in ALL_KEYS}
    assert (("tools", "bash"), "pid_namespace") in paths and (("providers", "retry"), "max_attempts") in paths
    assert (("mcp", "servers", "*"), "command") in paths and (("mcpServers", "*"), "disabled") in paths
    assert (("messengers", "bindings", "[]"), "approvers") in paths
    assert (("hooks", "Stop", "[]"), "name") in paths
    assert (("supervisor", "children", "*"), "restart") in paths and (("bus", "curve"), "secret_key") in paths
    assert len(ALL_KEYS) > 150


@pytest.mark.parametrize("key", ALL_KEYS, ids=lambda k: ".".join((*k.path, k.key)))
def test_geode_toml_documents_the_key_with_its_default(key: Key) -> None:
    docs = [d for d in documented() if d.key == key.key and _matches(key.path, d.path)]
    where = f"[{'.'.join(key.path)}] {key.key}" if key.path else key.key
    assert docs, f"{where} is read by the code but config/geode.toml does not document it"
    if not _concrete(key.path) or key.default is PydanticUndefined or key.default is None:
        return  # an entry's keys (examples) or a key without a fixed default: documenting it is enough
    exact = [d for d in docs if d.path == key.path and not d.example]
    computed = [d for d in docs if d.example and d.value is UNPARSED]
    assert exact or computed, (
        f"{where}: show the default as '# {key.key} = ...' (or '## {key.key} = <...>' if computed)"
    )
    for d in exact:
        got = TypeAdapter(key.annotation).validate_python(d.value)
        assert got == key.default, (
            f"{where}: config/geode.toml says {d.value!r}, the default is {key.default!r}"
        )
