"""The executor child's C heap on a real tree: concurrent run_bash calls (each with its handler and
pipe-reader threads) leave it with glibc's main arena only. Before, every thread that allocated got an arena
of its own (up to 8 per core) and each kept what it freed: the soak's +5 MiB of RSS per 1,000 turns."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.tools.spec import ToolCall
from tests.actors.tree_kit import children
from tests.tools.executor_tree import allow_all_tree, bound_executor

HEAP_MAX = 64 * 2**20  # glibc reserves each thread arena as one 64 MiB-aligned, 64 MiB mapping


def thread_arenas(pid: int) -> int:
    """glibc thread arenas of a live process, read from its maps (the main arena is the brk heap)."""
    rows = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        f = line.split()
        a, b = (int(x, 16) for x in f[0].split("-"))
        rows.append((a, b, f[1], len(f) > 5))
    n = 0
    for i, (a, b, perms, named) in enumerate(rows):
        if named or a % HEAP_MAX or not perms.startswith("rw"):
            continue
        nxt = rows[i + 1] if i + 1 < len(rows) else None
        end = nxt[1] if nxt and nxt[0] == b and nxt[2].startswith("---") and not nxt[3] else b
        n += end - a == HEAP_MAX
    return n


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[GeodeHome]:
    with allow_all_tree(tmp_path) as home:
        yield home


def test_concurrent_calls_leave_the_executor_one_malloc_arena(tree: GeodeHome, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    bus = Bus("heap-test", 1, tree).start()
    errors: list[str] = []
    try:

        def calls(k: int) -> None:
            client, ctx = bound_executor(bus, ws, f"heap-{k}", f"op-heap-{k}-0")
            for i in range(6):
                c = ctx.model_copy(update={"operation_id": f"op-heap-{k}-{i}", "step_id": f"st{i}"})
                call = ToolCall(id=f"tu-{k}-{i}", name="run_bash", input={"command": "true"})
                res = client.execute(c, call)
                if res.is_error:
                    errors.append(str(res.content)[:300])

        threads = [threading.Thread(target=calls, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        bus.stop()
    assert not errors, errors
    pid = children(tree)["executor"].pid
    assert pid
    assert thread_arenas(pid) == 0
