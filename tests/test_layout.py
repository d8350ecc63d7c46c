"""Meta-tests for the project's shape: a transport-free domain, small files, no grab-bag modules."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN_NAMES = {"utils", "helpers", "misc", "common"}


def _py_files(*dirs: str) -> list[Path]:
    return [p for d in dirs for p in (ROOT / d).rglob("*.py")]


def test_domain_imports_neither_zmq_nor_pykka() -> None:
    offenders = []
    for path in _py_files("geode"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for n in names:
                if n.split(".")[0] in {"zmq", "pykka", "actors"}:
                    offenders.append(f"{path.relative_to(ROOT)}: {n}")
    assert offenders == []


def test_no_grab_bag_modules() -> None:
    files = _py_files("geode", "actors")
    bad = [p for p in files if p.stem in FORBIDDEN_NAMES or p.parent.name in FORBIDDEN_NAMES]
    assert bad == []


def test_files_stay_under_800_lines_and_median_under_200() -> None:
    sizes = {p: len(p.read_text().splitlines()) for p in _py_files("geode", "actors")}
    too_big = {str(p.relative_to(ROOT)): n for p, n in sizes.items() if n > 800}
    assert too_big == {}
    ordered = sorted(sizes.values())
    assert ordered[len(ordered) // 2] < 200


def test_every_module_has_a_docstring() -> None:
    missing = []
    for path in _py_files("geode", "actors"):
        tree = ast.parse(path.read_text())
        if path.name == "__init__.py" and not tree.body:
            continue
        if ast.get_docstring(tree) is None:
            missing.append(str(path.relative_to(ROOT)))
    assert missing == []


def test_importing_geode_configures_no_logging_and_loads_no_sdk() -> None:
    code = (
        "import logging, sys, geode, geode.protocol.catalog as c; c.load_all();"
        "assert not logging.getLogger().handlers, logging.getLogger().handlers;"
        "bad = [m for m in ('anthropic', 'openai', 'zmq', 'pykka') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_protocol_doc_is_generated_from_the_catalogue() -> None:
    gen = ROOT / "scripts" / "gen_protocol_doc.py"
    r = subprocess.run([sys.executable, str(gen), "--check"], cwd=ROOT)
    assert r.returncode == 0, "docs/protocol.md is stale: run scripts/gen_protocol_doc.py"


def test_actors_top_level_is_the_process_list() -> None:
    """``ls actors`` shows one module per actor process (what ``geode status`` lists) and three
    sub-packages."""
    from actors.tree.registry import BUILDERS

    modules = {p.stem for p in (ROOT / "actors").glob("*.py") if p.name != "__init__.py"}
    packages = {p.name for p in (ROOT / "actors").iterdir() if (p / "__init__.py").exists()}
    processes = {ref.partition(":")[0].removeprefix("actors.") for ref in BUILDERS.values()}
    assert modules == processes == {"store", "lanes", "executor", "loop_worker", "control", "messengers"}
    assert packages == {"bus", "tree", "cli"}
