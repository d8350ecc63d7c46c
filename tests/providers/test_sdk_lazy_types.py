"""The provider SDKs' re-export packages loaded lazily (``geode/providers/sdk_lazy_types.py``): every name a
package gives is the object the real package gives, asked before or after its ``__init__`` has run; ``dir()``
and ``import *`` give what the real package gives; a streamed request through the SDK still works; and
``import anthropic`` loads far fewer modules. Each side runs in a fresh interpreter (pytest's may have
imported the SDKs already)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from geode.providers import sdk_lazy_types

# what each package of both SDKs gives, described so that two interpreters can be compared
_DESCRIBE = """
import importlib, json, os, re, sys, types
from geode.providers import sdk_lazy_types as L

def ident(obj):
    if isinstance(obj, types.ModuleType):
        return "module " + obj.__name__
    name = getattr(obj, "__qualname__", None)
    if isinstance(name, str) and isinstance(getattr(obj, "__module__", None), str):
        return f"{type(obj).__name__} {obj.__module__}.{name}"
    return re.sub(" at 0x[0-9a-f]+", "", f"{type(obj).__name__} {obj!r}")[:300]

def packages():
    found = []
    for root in ("anthropic", "openai"):
        base = os.path.dirname(importlib.util.find_spec(root).origin)
        for folder, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            if "__init__.py" in files and folder != base:
                name = root + "." + os.path.relpath(folder, base).replace(os.sep, ".")
                with open(os.path.join(folder, "__init__.py")) as f:
                    if L.reexports(f.read(), name) is not None:
                        found.append(name)
    return found
"""

_REAL = """
import anthropic, openai
out = {}
for name in packages():
    try:  # (a package of an extra whose dependency is not installed raises)
        module = importlib.import_module(name)
        star = {}
        exec(f"from {name} import *", star)
        out[name] = {"dir": dir(module), "star": sorted(star),
                     "names": {n: ident(getattr(module, n)) for n in dir(module) if not n.startswith("__")}}
    except Exception as exc:
        out[name] = {"error": type(exc).__name__}
print(json.dumps(out))
"""

_REAL_TOP = """
import anthropic
star = {}
exec("from anthropic import *", star)
listed = dir(anthropic)
print(json.dumps({"dir": listed, "star": sorted(star), "modules": sorted(sys.modules),
                  "names": {n: ident(getattr(anthropic, n)) for n in listed if not n.startswith("__")}}))
"""

_LAZY_TOP = """
L.install()
import anthropic
loader = anthropic.__loader__
assert isinstance(loader, L._DeferredImports), loader
modules = sorted(sys.modules)
star = {}
exec("from anthropic import *", star)
before = {n: getattr(anthropic, n) for n in loader.names}  # each asked first: imported on its own
listed = dir(anthropic)
wrong = [n for n, v in before.items() if getattr(anthropic, n) is not v]
print(json.dumps({"dir": listed, "star": sorted(star), "wrong": wrong, "modules": modules,
                  "names": {n: ident(getattr(anthropic, n)) for n in listed if not n.startswith("__")}}))
"""

_LAZY = """
L.install()
import anthropic, openai
dir(anthropic)  # its deferred platform clients imported, as in the real SDK (compared on their own below)
# the packages ``import anthropic`` runs ``from pkg import *`` of: their __init__ has run
materialized = {n for n, m in sys.modules.items() if isinstance(getattr(m, "__loader__", None), L._LazyInit)
                and not L.is_lazy(m)}
out = {}
wrong = []
for name in packages():
    module = importlib.import_module(name)
    if not L.is_lazy(module) and name not in materialized:
        wrong.append(f"{name} not lazy")
        continue
    try:
        index, _ = L.reexports(module.__spec__.loader.get_source(name), name)
        before = {n: getattr(module, n) for n in index}  # each asked while the __init__ has not run
        still = L.is_lazy(module)
        listed = dir(module)  # runs the real __init__
        wrong += [f"{name}.{n} is another object" for n, v in before.items() if getattr(module, n) is not v]
        if (not still and name not in materialized) or L.is_lazy(module):
            wrong.append(f"{name}: lazy {still} before dir(), {L.is_lazy(module)} after")
        star = {}
        exec(f"from {name} import *", star)
        out[name] = {"dir": listed, "star": sorted(star),
                     "names": {n: ident(getattr(module, n)) for n in listed if not n.startswith("__")}}
    except Exception as exc:
        out[name] = {"error": type(exc).__name__}
print(json.dumps({"out": out, "wrong": wrong}))
"""


def _run(code: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(out.stdout)


def test_every_name_of_every_lazy_package_is_the_real_packages_object() -> None:
    real = _run(_DESCRIBE + _REAL)
    lazy = _run(_DESCRIBE + _LAZY)
    assert lazy["wrong"] == []
    assert (
        len(real) > 150
    )  # anthropic's and openai's re-export packages (197 in anthropic 2.17 / openai 3.63)
    assert set(lazy["out"]) == set(real)
    for name, seen in real.items():
        got = lazy["out"][name]
        assert got.get("error") == seen.get("error"), name  # (an extra whose dependency is not installed)
        assert got.get("dir") == seen.get("dir"), name
        assert got.get("star") == seen.get("star"), name
        assert got.get("names") == seen.get("names"), name


def test_the_deferred_platform_clients_are_the_real_ones_and_imported_only_when_asked_for() -> None:
    real = _run(_DESCRIBE + _REAL_TOP)
    lazy = _run(_DESCRIBE + _LAZY_TOP)
    assert lazy["wrong"] == []
    assert lazy["dir"] == real["dir"]
    assert lazy["star"] == real["star"]
    assert lazy["names"] == real["names"]
    assert "AnthropicFoundry" in lazy["names"] and "AnthropicBedrock" in lazy["names"]
    for module in sdk_lazy_types.DEFERRED["anthropic"]:
        assert f"anthropic.{module}" in real["modules"]
        assert f"anthropic.{module}" not in lazy["modules"]  # until one of its names was asked for
    assert "anthropic.resources.beta.beta" not in lazy["modules"]


def test_a_deferral_the_init_does_not_allow_is_not_made(tmp_path: Any) -> None:
    (tmp_path / "lib" / "cloud").mkdir(parents=True)
    (tmp_path / "lib" / "cloud" / "__init__.py").write_text("from ._c import Cloud as Cloud\n")
    plain = "from .lib.cloud import *\nfrom .lib.other import Other\n__all__ = ['Other']\n"
    code_names = sdk_lazy_types._deferral(plain, "sdk", str(tmp_path), ("lib.cloud",))
    assert code_names is not None and code_names[1] == {"Cloud": ("sdk.lib.cloud", "Cloud")}
    for source in (
        "from .lib.other import Other\n",  # the statement is not there (another SDK release)
        "from .lib.cloud import Cloud\nCloud.x = 1\n",  # the name is used by the __init__
        "from .lib.cloud import Cloud\n__all__ = ['Cloud']\n",  # listed: the __init__ reads it back
        "from .lib.cloud import Cloud\ndef __getattr__(name): pass\n",
    ):
        assert sdk_lazy_types._deferral(source, "sdk", str(tmp_path), ("lib.cloud",)) is None, source


_REQUEST = """
import sys
from geode.providers import sdk_lazy_types
sdk_lazy_types.install()
import anthropic
from actors.tree import sdk_warmup
sdk_warmup.build_and_drop(["anthropic"])
assert sdk_warmup.rehearse_request(["anthropic"])  # a streamed request through the adapter and the SDK
print(len(sys.modules), sum(".beta" in m for m in sys.modules), sdk_lazy_types.is_lazy(anthropic.types.beta))
"""


def test_a_streamed_request_goes_through_the_sdk_with_its_packages_lazy() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _REQUEST], capture_output=True, text=True, timeout=120, check=True
    )
    modules, beta, lazy = out.stdout.split()[-3:]
    assert lazy == "True"
    # without the hook: 3,871 modules, 2,258 of them ``.beta`` (anthropic 2.17); with it 1,519 / 569
    assert int(modules) <= 1700
    assert int(beta) <= 650


def test_a_package_with_code_in_its_init_is_imported_as_usual() -> None:
    assert sdk_lazy_types.reexports("from .a import B as B\nfrom __future__ import annotations\n", "p") == (
        {"B": ("p.a", "B"), "annotations": ("__future__", "annotations")},
        None,
    )
    assert sdk_lazy_types.reexports('"""doc"""\n__all__ = ["B"]\nfrom .a import B\n', "p") == (
        {"B": ("p.a", "B")},
        ["B"],
    )
    for code in (
        "import typing\nfrom .a import B\n",
        "from .a import B\nB.x = 1\n",
        "from .a import *\n",
        "from ..a import B\n",
        "from . import a\n",
        "from .a import B\nfrom .b import a\n",  # the name a is bound to b.a, not to the submodule a
        "from .a import B\n__all__ = ['B'] + ['C']\n",
        "if True:\n    from .a import B\n",
    ):
        assert sdk_lazy_types.reexports(code, "p") is None, code


@pytest.mark.parametrize("first", ["name", "submodule", "dir", "missing"])
def test_a_lazy_package_answers_as_the_real_one(tmp_path: Any, first: str) -> None:
    """A made-up SDK: a name, a submodule, ``dir()`` and a missing name asked first; then the rest."""
    pkg = tmp_path / "fakesdk" / "types"
    pkg.mkdir(parents=True)
    (tmp_path / "fakesdk" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text(
        "from __future__ import annotations\nfrom .one import One as One\nfrom .two import Two, uno\n"
        "__all__ = ['One', 'Two']\n"
    )
    (pkg / "one.py").write_text("class One: pass\n")
    (pkg / "two.py").write_text("from . import One\nclass Two(One): pass\nuno = 1\n")
    (pkg / "three.py").write_text("X = 3\n")
    code = f"""
import sys
sys.path.insert(0, {str(tmp_path)!r})
from geode.providers import sdk_lazy_types as L
sys.meta_path.insert(0, L.LazyPackages(("fakesdk.",)))
import fakesdk.types as t
assert L.is_lazy(t) and "fakesdk.types.two" not in sys.modules
first = {first!r}
if first == "name":
    assert t.One.__name__ == "One" and "fakesdk.types.two" not in sys.modules and L.is_lazy(t)
elif first == "submodule":
    assert t.two.Two.__mro__[1] is t.One and L.is_lazy(t)
elif first == "dir":
    assert {{"One", "Two", "uno", "one", "two", "annotations", "__all__"}} <= set(dir(t)) and not L.is_lazy(t)
else:
    assert not hasattr(t, "Missing") and not L.is_lazy(t)
assert not hasattr(t, "three")  # a submodule the __init__ does not import: not an attribute until imported
assert t.uno == 1 and t.one.One is t.One
star = {{}}
exec("from fakesdk.types import *", star)
assert sorted(n for n in star if n != "__builtins__") == ["One", "Two"]
import fakesdk.types.three
assert t.three.X == 3 and t.__all__ == ["One", "Two"]
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr
