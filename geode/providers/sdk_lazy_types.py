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
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

# the SDKs whose packages (not the top-level ones) are loaded lazily when their ``__init__`` is a re-export
SDK_ROOTS = ("anthropic.", "openai.")

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


class LazyPackages(importlib.abc.MetaPathFinder):
    """Finds the modules under ``roots`` as the path finder does; a pure re-export package gets a loader that
    defers its ``__init__``, any other module its usual spec."""

    def __init__(self, roots: tuple[str, ...] = SDK_ROOTS) -> None:
        self.roots = roots

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
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
        except (ImportError, OSError):
            return spec
        if found is None:
            return spec  # not a pure re-export __init__: imported as usual
        spec.loader = _LazyInit(real, *found)
        return spec


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once); packages already imported stay as they are."""
    if not any(isinstance(f, LazyPackages) for f in sys.meta_path):
        sys.meta_path.insert(0, LazyPackages())


def is_lazy(module: ModuleType) -> bool:
    """Whether ``module`` is a lazy package whose real ``__init__`` has not run."""
    getattr_ = module.__dict__.get("__getattr__")
    return isinstance(getattr(getattr_, "__self__", None), _Package)
