"""`geode status` on a real tree reports every process's RSS and PSS (children, the zygote, the supervisor)
and the tree's total; forked children share the zygote's pages, so their PSS is below their RSS."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.tree.proc_memory import rollup
from geode.home import GeodeHome
from tests.actors.tree_kit import geode, scripted_tree, wait_children


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeodeHome]:
    with scripted_tree(tmp_path_factory.mktemp("memory"), lambda req: {"text": "pong"}) as (home, _):
        yield home


def _status(home: GeodeHome) -> dict[str, Any]:
    r = geode(home, "status", "--json", timeout=30)
    assert r.returncode == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def test_status_reports_rss_and_pss_of_every_process_and_the_total(home: GeodeHome) -> None:
    wait_children(home, lambda k: all(c.state == "running" for c in k.values()), 60)
    st = _status(home)
    kids = st["children"]
    zygote = st["zygote"]
    assert zygote is not None and zygote["pid"] not in (st["pid"], *[c["pid"] for c in kids])
    procs = [(st["rss_bytes"], st["pss_bytes"]), (zygote["rss_bytes"], zygote["pss_bytes"])]
    procs += [(c["rss_bytes"], c["pss_bytes"]) for c in kids]
    assert all(rss and pss and 0 < pss <= rss for rss, pss in procs), procs
    for c in kids:
        assert c["pss_bytes"] < c["rss_bytes"], c  # it shares pages (the zygote's imports, libraries)
        anon = rollup(c["pid"])  # forked, not exec'd: part of its heap is the zygote's, shared
        assert anon is not None and anon["Pss_Anon"] < anon["Anonymous"], (c["name"], anon)
    total = st["total"]
    assert total["processes"] == len(kids) + 2
    assert total["pss_bytes"] == sum(pss for _, pss in procs)
    assert total["rss_bytes"] == sum(rss for rss, _ in procs)

    table = geode(home, "status", timeout=30)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert "RSS MiB" in lines[1] and "PSS MiB" in lines[1], lines[:2]
    store = next(line for line in lines if line.startswith("store "))
    assert len([w for w in store.split() if w.replace(".", "", 1).isdigit() and "." in w]) == 2, store  # MiB
    assert any(line.startswith("zygote ") and "fork server" in line for line in lines), lines
    assert any(line.startswith("supervisor ") for line in lines[2:]), lines
    assert any(f"total of {len(kids) + 2} processes" in line for line in lines), lines


def test_the_supervisor_shares_its_imports_with_the_zygote(home: GeodeHome) -> None:
    """`geode serve` forks the zygote from the daemon once the tree's modules are imported (zygote_fork.py):
    the ~22 MiB of heap those imports make is shared by the supervisor, the zygote and the children instead
    of held again by an exec'd zygote (supervisor private dirty 18.7 vs 30.0 MiB; docs/benchmarks.md)."""
    wait_children(home, lambda k: all(c.state == "running" for c in k.values()), 60)
    st = _status(home)
    sup, zygote = rollup(st["pid"]), st["zygote"]
    assert sup is not None and zygote is not None
    assert b"actors.tree.zygote" in Path(f"/proc/{zygote['pid']}/cmdline").read_bytes()
    assert sup["Shared_Dirty"] > 5 * 2**20, sup  # its heap's pages, mapped by the zygote too (0 exec'd)
    assert sup["Private_Dirty"] < 16 * 2**20, sup  # 11.2 MiB; 18.6 when the zygote imported CORE itself


def test_the_zygote_forked_from_the_daemon_imports_no_module_itself(home: GeodeHome) -> None:
    """The daemon imports every child's code before it forks the zygote (zygote_fork.import_core): the zygote
    imported ~350 modules itself after the fork, writing into ~11 MiB of the pages it shared with the
    supervisor (a private copy in each: supervisor private dirty 18.6 vs 11.2 MiB; docs/benchmarks.md)."""
    wait_children(home, lambda k: all(c.state == "running" for c in k.values()), 60)
    log = (home.logs_dir / "zygote.log").read_text()
    assert "zygote: 0 modules imported for CORE" in log, log[-3000:]
