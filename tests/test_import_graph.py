"""The import graph of geode/ and actors/ has no circle (issue 28): every import counts — module-level,
function-level (lazy) and ``if TYPE_CHECKING:`` alike — so a lazy import may save start-up time but may not
close a circle."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("geode", "actors")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    return {_module_name(p, root): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a ``from … import`` names, relative levels resolved against ``module``."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of the dotted ``name`` that is one of our modules (``a.b.C`` -> ``a.b``)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports anywhere in its text. ``from pkg import sub`` is an
    edge to ``pkg.sub`` when ``sub`` is a submodule, else to ``pkg`` (its ``__init__``)."""
    modules = _modules(root, packages)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node, module, is_package)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                owner = _owner(target, modules)
                if owner is not None and owner != module:
                    graph[module].add(owner)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_the_graph_sees_lazy_type_checking_and_relative_imports(tmp_path: Path) -> None:
    """The walker is not blind: a function-level import, a TYPE_CHECKING import, a submodule named by
    ``from pkg import sub`` and relative imports are all edges; a name from a package is an edge to it."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from pkg.a import A\n",
        "a.py": "def f():\n    from pkg import b\n    import pkg.sub.d as d\nA = 1\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import C\n",
        "c.py": "from . import A\nimport os\n",
        "sub/__init__.py": "from .. import c\n",
        "sub/d.py": "from .e import E\n",
        "sub/e.py": "",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    assert import_graph(tmp_path, ("pkg",)) == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.b", "pkg.sub.d"},
        "pkg.b": {"pkg.c"},
        "pkg.c": {"pkg"},
        "pkg.sub": {"pkg.c"},
        "pkg.sub.d": {"pkg.sub.e"},
        "pkg.sub.e": set(),
    }
    assert circles(import_graph(tmp_path, ("pkg",))) == [["pkg", "pkg.a", "pkg.b", "pkg.c"]]
    real = import_graph()
    assert "actors.cli.chat_cmds" in real["actors.cli.main"]  # imported inside _run_hot
    assert len(real) > 200 and sum(map(len, real.values())) > 500


def test_a_planted_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_geode_and_actors_have_no_import_circle() -> None:
    found = circles(import_graph())
    message = "\n".join(" <-> ".join(c) for c in found)
    assert found == [], f"import circles (break each along its seam):\n{message}"
