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


def test_files_stay_under_400_lines_and_median_under_200() -> None:
    """A module is split along its seams before it reaches 400 lines (a standing rule, issue 28)."""
    sizes = {p: len(p.read_text().splitlines()) for p in _py_files("geode", "actors")}
    too_big = {str(p.relative_to(ROOT)): n for p, n in sizes.items() if n >= 400}
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
    assert (
        modules
        == processes
        == {"store", "lanes", "executor", "loop_worker", "control", "messengers", "scheduler", "webhooks"}
    )
    assert packages == {"bus", "tree", "cli"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Every import of every module of geode/ and actors/ (module-level, function-level and TYPE_CHECKING
    alike), resolved to the modules of the two packages it loads, parent packages included."""
    paths = {_module_name(p): p for p in _py_files("geode", "actors")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join([*base, node.module] if node.module else base)
                else:
                    module = node.module or ""
                targets.add(module)
                targets.update(f"{module}.{a.name}" for a in node.names)
        loaded = set()
        for target in targets:
            parts = target.split(".")
            loaded.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        graph[name] = {m for m in loaded if m in paths and m != name}
    return graph


def test_no_runtime_child_imports_the_fakes() -> None:
    """The local Telegram/Slack/Discord servers and the scripted provider are in geode/testing, and nothing a
    child process runs (its actor module, the child entry point, the zygote) imports them, even lazily."""
    from actors.tree.registry import BUILDERS

    graph = _import_graph()
    roots = [ref.partition(":")[0] for ref in BUILDERS.values()]
    roots += ["actors.tree.child_main", "actors.tree.zygote", "actors.tree.supervisor"]
    reached: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(graph[module])
    assert {"geode.messengers.poller", "geode.messengers.telegram", "geode.loop"} <= reached  # graph sanity
    fakes = {f"geode.testing.{m}" for m in ("bot_api_server", "slack_server", "discord_server", "scripted")}
    assert fakes <= graph.keys()  # not vacuous: the fakes are there to be (not) reached
    assert sorted(m for m in reached if m.split(".")[:2] == ["geode", "testing"]) == []


def test_the_fakes_live_in_geode_testing() -> None:
    """A module of geode/ that serves HTTP (aiohttp.web, http.server, socketserver) is a fake for tests and
    demos, and so is what ``scripts/*-server`` runs: all of them are in geode/testing, none beside the
    runtime they stand in for. The one runtime server is the webhooks child's intake app (DESIGN §9)."""
    servers = {"aiohttp.web", "http.server", "socketserver"}
    runtime_servers = {"geode/webhooks/http_app.py"}
    misplaced = []
    for path in _py_files("geode"):
        rel = path.relative_to(ROOT)
        if rel.parts[1] == "testing" or rel.as_posix() in runtime_servers:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            else:
                continue
            if names & servers:
                misplaced.append(str(path.relative_to(ROOT)))
    assert misplaced == []
    launched = [
        line.split(" -m ", 1)[1].split()[0]
        for script in sorted((ROOT / "scripts").glob("*-server"))
        for line in script.read_text().splitlines()
        if " -m " in line and not line.startswith("#")
    ]
    assert len(launched) == 3
    assert [m for m in launched if not m.startswith("geode.testing.")] == []


def test_the_readme_layout_names_every_package() -> None:
    """README's Layout block has a line for every package of geode/ and actors/ (and geode/defaults/)."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Layout", 1)[1].split("```", 2)[1]
    listed = {line.split()[0] for line in block.splitlines() if line.strip()}
    packages = {p.parent.name + "/" for top in ("geode", "actors") for p in (ROOT / top).rglob("__init__.py")}
    assert len(packages) > 15  # not vacuous
    assert packages | {"defaults/"} <= listed, "packages missing from README's Layout"
