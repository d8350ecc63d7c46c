"""GEODE_TRACEMALLOC diagnostics: which children trace, and a dump that names what grew since the baseline."""

from __future__ import annotations

import tracemalloc

from actors.tree.heap_trace import HeapTrace, wanted


class Blob:
    def __init__(self) -> None:
        self.data = bytearray(4096)


def test_wanted_names_children_or_all() -> None:
    assert wanted("executor", "executor,store") and wanted("store", " store ")
    assert not wanted("lanes", "executor,store") and not wanted("lanes", "")
    assert wanted("lanes", "1") and wanted("lanes", "all")


def test_a_dump_reports_the_growth_since_the_first_one() -> None:
    tracemalloc.start(4)
    try:
        trace = HeapTrace("probe", tracing=True)
        assert trace.dump()[0].startswith("heap baseline of probe:")
        kept = [Blob() for _ in range(2000)]  # ~8 MiB that stays alive
        lines = trace.dump()
    finally:
        tracemalloc.stop()
    assert len(kept) == 2000
    assert lines[0].startswith("heap of probe now:") and "growth since the baseline" in lines[1]
    assert "Blob +2000" in lines[2], lines[2]
    assert any("test_heap_trace.py" in line and "KiB" in line for line in lines), "\n".join(lines)
