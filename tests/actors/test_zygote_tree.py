"""The fork server on a real `geode serve` tree: children are forked from the zygote (``ps`` still shows their
own command line) and import nothing after the fork, the children start while the zygote imports the
provider SDKs (the loop workers swapped after for forks that share them), a killed loop worker is back and
answering within a fraction of a second with the provider SDK already imported, and a killed zygote takes
its children along and the tree comes back serving."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from actors.tree.proc_memory import rollup
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import alive, geode, scripted_home, serve, stop, wait_children
from tests.waiting import poll_for


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()


def _modules(pid: int) -> str:
    """The shared objects mapped into ``pid`` (compiled extension modules show here)."""
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, ScriptedServer]]:
    """Anthropic's model configured; OpenAI's endpoint and key set too (a session may select its model)."""
    base = tmp_path_factory.mktemp("zygote")
    with ScriptedServer(lambda req: {"text": "pong"}) as model:
        openai = f'[providers.openai]\nbase_url = "{model.openai_base_url}"\nlogin = "apikey"\n'
        home = scripted_home(base, model, extra=openai)
        with home.env_file.open("a") as env:
            env.write("OPENAI_API_KEY=sk-test-openai\n")
        serve(home)
        try:
            yield home, model
        finally:
            stop(home)


def _all_running(home: Any) -> dict[str, Any]:
    return wait_children(home, lambda k: all(c.state == "running" for c in k.values()), 60)


def test_children_are_forked_by_the_zygote_and_look_like_themselves(tree: tuple[Any, ScriptedServer]) -> None:
    home, _ = tree
    kids = _all_running(home)
    parents = {_ppid(c.pid) for c in kids.values()}
    assert len(parents) == 1, parents  # one fork server for every child
    zygote = parents.pop()
    assert "actors.tree.zygote" in _cmdline(zygote)
    for name, c in kids.items():
        assert _cmdline(c.pid).endswith(f"-m actors.tree.child_main {name}"), _cmdline(c.pid)
    imported = (home.logs_dir / "zygote.log").read_text()
    assert "zygote: imported actors.messengers in" in imported
    assert "geode.messengers.telegram" not in imported  # no chat is bound: no messenger SDK imported
    assert geode(home, "ask", "ping", "--json").returncode == 0


def _ready_line(home: Any, name: str, pid: int) -> str:
    """The child's own ready line for that pid (child_main logs it once the builder is up)."""
    lines = (home.logs_dir / f"{name}.log").read_text().splitlines()
    return next((ln for ln in lines if f"ready (pid {pid};" in ln), "")


def test_no_child_imports_a_module_after_the_fork(tree: tuple[Any, ScriptedServer]) -> None:
    """What a forked child imports itself is private memory (the config schema alone was ~8 MiB a child) and
    start time of every incarnation: the zygote imports all of it before it forks."""
    home, _ = tree
    kids = _all_running(home)
    for name, c in kids.items():
        assert c.pid is not None
        line = poll_for(partial(_ready_line, home, name, c.pid), 30, what=f"{name}'s ready line")
        assert "; 0 modules imported after the fork)" in line, line


def test_children_without_an_sdk_start_before_the_zygote_imports_the_sdks(
    tree: tuple[Any, ScriptedServer],
) -> None:
    """`geode serve`: every child, the loop workers included, is forked right after the zygote's own imports
    and starts while it imports the provider SDKs (1-2 s); then each loop worker is swapped for a fork that
    shares them (test_zygote_swap_tree.py). So the SDK is in the loop workers, not in the others."""
    home, _ = tree

    def swapped(k: dict[str, Any]) -> bool:
        loops = [c for n, c in k.items() if n.startswith("loop-")]
        return all(c.state == "running" for c in k.values()) and all(c.incarnation >= 2 for c in loops)

    kids = wait_children(home, swapped, 60)
    log = (home.logs_dir / "supervisor.log").read_text()
    sdks_at = log.index("zygote imported the SDKs")
    for name, c in kids.items():
        assert c.pid is not None
        assert log.index(f"started {name}#1 ") < sdks_at, name
        if name.startswith("loop-"):
            assert log.index(f"started {name}#2 ") > sdks_at, name
            assert "jiter" in _modules(c.pid), name  # anthropic's compiled JSON parser came with the fork
        else:
            assert "jiter" not in _modules(c.pid), name  # the provider SDK is not in this child


def test_a_killed_loop_worker_is_back_at_once_with_its_sdk_imported(tree: tuple[Any, ScriptedServer]) -> None:
    home, _ = tree
    kids = _all_running(home)
    zygote = _ppid(kids["store"].pid)
    poll_for(lambda: "jiter" in _modules(zygote), 60, what="the zygote to import the provider SDKs")
    for name in ("loop-1", "loop-2"):
        c = kids[name]
        t0 = time.monotonic()
        os.kill(c.pid, signal.SIGKILL)
        back = wait_children(
            home, lambda k, n=name, i=c.incarnation: k[n].incarnation > i and k[n].state == "running", 30
        )[name]
        took = time.monotonic() - t0
        assert _ppid(back.pid) == zygote
        assert "jiter" in _modules(back.pid)  # anthropic's compiled JSON parser: the SDK came with the fork
        assert took < 5.0, f"{name} took {took:.2f}s to be running again"
    r = geode(home, "ask", "after the kills", "--json")
    assert r.returncode == 0 and '"pong"' in r.stdout, r.stdout + r.stderr


def _private_dirty_mib(pid: int) -> float:
    fields = rollup(pid)
    assert fields is not None, pid
    return fields["Private_Dirty"] / 2**20


def _warmed(home: Any, name: str, pid: int) -> bool:
    lines = (home.logs_dir / f"{name}.log").read_text().splitlines()
    return any(f"pid={pid} " in ln and "provider warmed in" in ln for ln in lines)


def test_a_loop_worker_shares_the_sdk_client_state_the_zygote_built(tree: tuple[Any, ScriptedServer]) -> None:
    """The zygote builds one client per provider SDK after importing them (sdk_warmup.py): a fresh loop worker
    whose warm-up has built its own client has copied ~4 MiB less of the zygote's pages (private dirty 23.0
    MiB here without it, 19.0 with it; docs/benchmarks.md): each loop worker's share of the tree's PSS. And
    its record of the modules it imports itself touches none of the zygote's ~4,300 module names (a copy of
    ``sys.modules`` at the fork copied ~5 MiB of their pages: 17.5 MiB at rest before, 13.1 after)."""
    home, _ = tree
    kids = _all_running(home)
    zygote = _ppid(kids["store"].pid)
    poll_for(lambda: "jiter" in _modules(zygote), 60, what="the zygote to import the provider SDKs")
    built = "zygote: built the anthropic client in"
    poll_for(lambda: built in (home.logs_dir / "zygote.log").read_text(), 30, what="the zygote's client")
    rehearsed = "zygote: rehearsed a request in"  # the first request's lazy state, answered in memory
    poll_for(lambda: rehearsed in (home.logs_dir / "zygote.log").read_text(), 30, what="the zygote's request")
    c = kids["loop-2"]
    os.kill(c.pid, signal.SIGKILL)  # a fresh fork that has run no turn yet
    back = wait_children(home, lambda k: k["loop-2"].incarnation > c.incarnation and k["loop-2"].pid, 30)
    pid = back["loop-2"].pid
    assert pid is not None
    poll_for(partial(_warmed, home, "loop-2", pid), 30, what="the fresh worker's provider warm-up")
    assert _private_dirty_mib(pid) < 16.0, _private_dirty_mib(pid)


def _modules_carried(home: Any, name: str, pid: int) -> int:
    line = poll_for(partial(_ready_line, home, name, pid), 30, what=f"{name}'s ready line")
    return int(line.split(f"ready (pid {pid}; ", 1)[1].split(" modules;", 1)[0])


# modules a child carries (its ready line): the store 791, a loop worker 4,284 (anthropic's SDK: 3,400); 83
# more each with httpx's command line (rich, click, pygments), 522 more in a loop worker with the openai SDK
STORE_MODULES_MAX, LOOP_MODULES_MAX = 840, 4_550


def test_the_zygote_imports_only_the_configured_vendors_sdk_and_no_command_line(
    tree: tuple[Any, ScriptedServer],
) -> None:
    """The config's model is Anthropic's: the zygote (so every loop worker) does not carry the openai SDK
    (~13 MiB of the tree), and no child carries httpx's command-line client (~4.5 MiB); counts of modules."""
    home, _ = tree
    kids = wait_children(  # the loop workers swapped for forks with the SDK
        home,
        lambda k: all(
            c.state == "running" and not c.swap and c.incarnation >= 2
            for n, c in k.items()
            if n.startswith("loop-")
        ),
        60,
    )
    zlog = (home.logs_dir / "zygote.log").read_text()
    assert "zygote: imported anthropic in" in zlog and "zygote: imported openai" not in zlog, zlog[-2000:]
    store, loop = kids["store"], kids["loop-1"]
    assert store.pid is not None and loop.pid is not None
    assert _modules_carried(home, "store", store.pid) <= STORE_MODULES_MAX
    assert _modules_carried(home, "loop-1", loop.pid) <= LOOP_MODULES_MAX


def test_a_session_on_another_vendors_model_imports_its_sdk_in_the_worker(
    tree: tuple[Any, ScriptedServer],
) -> None:
    """The zygote has no openai SDK here: a turn on an OpenAI model still runs, its worker imports it."""
    home, model = tree
    r = geode(home, "ask", "which vendor?", "--model", "gpt-5.5", "--json", timeout=120)
    assert r.returncode == 0 and '"pong"' in r.stdout, r.stdout + r.stderr
    assert [q.body["model"] for q in model.requests_for("openai-responses")][-1:] == ["gpt-5.5"]


def test_a_killed_zygote_takes_its_children_and_the_tree_comes_back(tree: tuple[Any, ScriptedServer]) -> None:
    home, _ = tree
    kids = _all_running(home)
    zygote = _ppid(kids["store"].pid)
    os.kill(zygote, signal.SIGKILL)
    back = wait_children(  # settled: the new zygote's early loop workers swapped for forks with the SDKs
        home,
        lambda k: all(
            c.state == "running" and c.incarnation > kids[n].incarnation and not c.swap for n, c in k.items()
        ),
        60,
    )
    assert not any(alive(c.pid) for c in kids.values() if c.pid)  # none left behind
    fresh = {_ppid(c.pid) for c in back.values()}
    assert len(fresh) == 1 and zygote not in fresh and "actors.tree.zygote" in _cmdline(fresh.pop())
    r = geode(home, "ask", "after the zygote died", "--json")
    assert r.returncode == 0 and '"pong"' in r.stdout, r.stdout + r.stderr
