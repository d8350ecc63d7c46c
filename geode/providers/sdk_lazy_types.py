"""An import hook that loads the provider SDKs' re-export packages lazily, so ``import anthropic`` does not
import ~1,000 type and resource modules geode never uses (``import openai``: ~550).

Importing a submodule runs its package's ``__init__``, and most of the SDKs' packages are ``__init__``s of
nothing but ``from .x import X as X``: ``anthropic.types.shared.error_details`` imports one module of
``anthropic.types.beta`` and with it every beta type module. The SDKs on disk stay as they are: the hook (a
``sys.meta_path`` finder for the modules under :data:`SDK_ROOTS`, put first by :func:`install` before an SDK
is imported) gives such a package a module whose ``__path__`` is the real one but whose ``__init__`` has not
run. Its PEP 562 ``__getattr__`` answers a name the ``__init__`` binds by importing the one submodule it comes
from (``from anthropic.types.beta import BetaMessage`` imports ``beta_message`` only), the name of a submodule
the ``__init__`` imports by importing that one, and anything else (``__all__`` not written as a literal,
``dir()``, a name the package does not have) by running the real ``__init__`` into the module first; every
answer is the object the real package gives (``tests/providers/test_sdk_lazy_types.py``).

Only a package whose ``__init__`` does nothing but bind names imported from its own submodules (plus
``from __future__`` lines, a docstring and a literal ``__all__``) is made lazy: running such an ``__init__``
late, or twice, is the same as running it once at import. Any other module (the SDKs' top-level packages, an
``__init__`` with code, a later SDK release that adds some) is imported as usual (found once, by the path
finder).

The top-level ``anthropic/__init__.py`` also imports the cloud platforms' clients (``lib.foundry``,
``lib.bedrock``, ``lib.vertex``, ``lib.aws``, ``lib.google_cloud``: :data:`DEFERRED`), which geode never
builds and which import ``resources.beta`` and the types it uses (~1,300 modules, ~18 MiB of heap). It runs
without those statements (compiled from its own source); the names they bind (``AnthropicFoundry``, the
``import *`` of ``lib.bedrock`` and ``lib.vertex``) are imported at their first use by a PEP 562
``__getattr__``, and ``dir()`` imports them all. Only when each statement is found and none of its names is
used elsewhere in the ``__init__`` (its ``__all__`` included); otherwise the ``__init__`` runs as it is.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

# the SDKs whose packages (not the top-level ones) are loaded lazily when their ``__init__`` is a re-export
SDK_ROOTS = ("anthropic.", "openai.")

# the SDKs' top-level imports of clients geode never builds (the cloud platforms' variants of the client and
# what they import: ``lib.foundry`` alone imports ``resources.beta.beta`` and its ~1,000 modules), deferred
# to the first use of a name they bind (``_deferral``)
DEFERRED = {"anthropic": ("lib.foundry", "lib.bedrock", "lib.vertex", "lib.aws", "lib.google_cloud")}

# a name the ``__init__`` binds -> (the module it is imported from, its name there)
Index = dict[str, tuple[str, str]]


def reexports(source: str, package: str) -> tuple[Index, list[str] | None] | None:
    """What a pure re-export ``__init__`` binds, its literal ``__all__``; None for any other ``__init__`` (and
    for one that binds a name to something else than its submodule of that name: ``from .x import x``, which
    the submodule's import, by anyone, would bind in the package while it is lazy)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    index: Index = {}
    names: list[str] | None = None
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module == "__future__":
                where = "__future__"
            elif node.level == 1 and node.module:
                where = f"{package}.{node.module}"
            else:
                return None
            for alias in node.names:
                if alias.name == "*":
                    return None
                index[alias.asname or alias.name] = (where, alias.name)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node is tree.body[0]:
            continue  # the docstring
        elif _literal_all(node):
            names = list(ast.literal_eval(node.value))  # type: ignore[attr-defined]
        else:
            return None
    if _submodules(index, package) & index.keys():
        return None
    return index, names


def _submodules(index: Index, package: str) -> frozenset[str]:
    """The submodules the ``__init__`` imports (``a`` of ``from .a.b import X``): the package's attributes."""
    return frozenset(
        where[len(package) + 1 :].split(".")[0] for where, _ in index.values() if where != "__future__"
    )


def _literal_all(node: ast.stmt) -> bool:
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return False
    target = node.targets[0]
    if not (isinstance(target, ast.Name) and target.id == "__all__"):
        return False
    value = node.value
    return isinstance(value, ast.List | ast.Tuple) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
    )


class _LazyInit(importlib.abc.Loader):
    """Loads a package without running its ``__init__`` (see the module's docstring)."""

    def __init__(self, real: Any, index: Index, names: list[str] | None) -> None:
        self.real = real
        self.index = index
        self.names = names
        self.submodules = _submodules(index, real.name)

    def __getattr__(self, name: str) -> Any:  # get_source, get_code, get_resource_reader, ...: the real one's
        return getattr(self.real, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # the default module

    def exec_module(self, module: ModuleType) -> None:
        _Package(module, self).install()


class _Package:
    """A lazy package's ``__getattr__`` and ``__dir__``, until its real ``__init__`` has run."""

    def __init__(self, module: ModuleType, loader: _LazyInit) -> None:
        self.module = module
        self.loader = loader
        self.name = module.__name__
        self.done = False
        self.running: int | None = None  # the thread running the real __init__
        self.lock = threading.RLock()

    def install(self) -> None:
        space = self.module.__dict__
        if self.loader.names is not None:
            space["__all__"] = list(self.loader.names)
        space["__getattr__"] = self.getattr
        space["__dir__"] = self.dir

    def getattr(self, attr: str) -> Any:
        found = self.loader.index.get(attr)
        if found is not None:
            where, name = found
            value = getattr(importlib.import_module(where), name)
            self.module.__dict__[attr] = value  # (over the submodule of that name its import bound)
            return value
        if attr in self.loader.submodules:  # one the __init__ imports: an attribute of the real package
            return importlib.import_module(f"{self.name}.{attr}")  # (the import binds it in the package)
        self.materialize()
        try:
            return self.module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {self.name!r} has no attribute {attr!r}") from None

    def dir(self) -> list[str]:
        self.materialize()
        return sorted(self.module.__dict__)

    def materialize(self) -> None:
        """Run the real ``__init__`` into the module: it is then the real package."""
        with self.lock:
            if self.done or self.running == threading.get_ident():
                return  # (a name asked for while the __init__ runs: as a partly imported package answers)
            self.running = threading.get_ident()
            try:
                exec(self.loader.real.get_code(self.name), self.module.__dict__)
            finally:
                self.running = None
            self.done = True
            space = self.module.__dict__
            if space.get("__getattr__") == self.getattr:
                del space["__getattr__"]
            if space.get("__dir__") == self.dir:
                del space["__dir__"]


def _deferral(source: str, package: str, folder: str, deferred: tuple[str, ...]) -> tuple[Any, Index] | None:
    """A top-level ``__init__``'s code without its ``from .<deferred> import ...`` statements, and the names
    they bind; None (imported as usual) when one is not found, when a bound name is used anywhere else in the
    ``__init__`` (``__all__`` included) or when the ``__init__`` has a module ``__getattr__``/``__dir__``."""
    tree = ast.parse(source)
    names: Index = {}
    kept: list[ast.stmt] = []
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and node.level == 1 and node.module in deferred):
            kept.append(node)
            continue
        where = f"{package}.{node.module}"
        for alias in node.names:
            if alias.name != "*":
                names[alias.asname or alias.name] = (where, alias.name)
                continue
            path = os.path.join(folder, *str(node.module).split("."), "__init__.py")
            with open(path, encoding="utf-8") as f:
                found = reexports(f.read(), where)
            if found is None:
                return None
            index, listed = found
            public = listed or [n for n in (*index, *_submodules(index, where)) if not n.startswith("_")]
            names.update((n, (where, n)) for n in public)
    if len(tree.body) - len(kept) != len(deferred):
        return None
    tree.body = kept
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    used |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    used |= {
        n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    used |= {
        a.asname or a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom | ast.Import)
        for a in n.names
    }
    if used & (names.keys() | {"__getattr__", "__dir__"}):
        return None
    return compile(tree, os.path.join(folder, "__init__.py"), "exec"), names


class _DeferredImports(importlib.abc.Loader):
    """Runs a top-level ``__init__`` without its deferred imports; the names they bind are imported on first
    use (a PEP 562 ``__getattr__``; ``dir()`` imports them all, as the real ``__init__`` would have)."""

    def __init__(self, real: Any, code: Any, names: Index) -> None:
        self.real = real
        self.code = code
        self.names = names

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        space = module.__dict__
        names = self.names

        def deferred(attr: str) -> Any:
            found = names.get(attr)
            if found is None:
                raise AttributeError(f"module {module.__name__!r} has no attribute {attr!r}")
            value = getattr(importlib.import_module(found[0]), found[1])
            space[attr] = value
            return value

        def listed() -> list[str]:
            for attr in names:
                if attr not in space:
                    deferred(attr)
            for ours, own in (("__getattr__", deferred), ("__dir__", listed)):
                if space.get(ours) is own:  # every name is bound: the module is the real one now
                    del space[ours]
            return sorted(space)

        exec(self.code, space)
        space["__getattr__"] = deferred
        space["__dir__"] = listed


class LazyPackages(importlib.abc.MetaPathFinder):
    """Finds the modules under ``roots`` as the path finder does; a pure re-export package gets a loader that
    defers its ``__init__``, any other module its usual spec."""

    def __init__(
        self, roots: tuple[str, ...] = SDK_ROOTS, deferred: dict[str, tuple[str, ...]] | None = None
    ) -> None:
        self.roots = roots
        self.deferred = DEFERRED if deferred is None else deferred

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in self.deferred:
            return self._top_level(fullname, path, target)
        if not fullname.startswith(self.roots):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.submodule_search_locations is None:
            return spec  # (what the path finder after us would find: found once)
        real = spec.loader
        if not isinstance(real, importlib.machinery.SourceFileLoader):
            return spec
        try:
            found = reexports(real.get_source(fullname) or "", fullname)
        except Exception:  # (unreadable, not text, ...): the hook never stands between the SDK and an import
            return spec
        if found is None:
            return spec  # not a pure re-export __init__: imported as usual
        spec.loader = _LazyInit(real, *found)
        return spec

    def _top_level(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> importlib.machinery.ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        real = None if spec is None else spec.loader
        if spec is None or spec.origin is None or not isinstance(real, importlib.machinery.SourceFileLoader):
            return spec
        try:
            plan = _deferral(
                real.get_source(fullname) or "",
                fullname,
                os.path.dirname(spec.origin),
                self.deferred[fullname],
            )
        except Exception:  # (unreadable, a statement that does not compile alone, ...): as it is
            return spec
        if plan is not None:
            spec.loader = _DeferredImports(real, *plan)
        return spec


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once); packages already imported stay as they are."""
    if not any(isinstance(f, LazyPackages) for f in sys.meta_path):
        sys.meta_path.insert(0, LazyPackages())


def is_lazy(module: ModuleType) -> bool:
    """Whether ``module`` is a lazy package whose real ``__init__`` has not run."""
    getattr_ = module.__dict__.get("__getattr__")
    return isinstance(getattr(getattr_, "__self__", None), _Package)
