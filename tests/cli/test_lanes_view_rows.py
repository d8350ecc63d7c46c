"""``geode status``'s held-lane lines from lanes' rows (``session_id`` in each) and from the map keyed by
session id a daemon sent before (geode/lanes/queue.py): the same lines, sorted by session."""

from __future__ import annotations

from actors.cli.lanes_view import held_rows, lanes_lines

ROWS = [
    {"session_id": "s-b", "turn_id": "t-2", "held_s": 1.25, "queued": 0},
    {"session_id": "s-a", "turn_id": "t-1", "held_s": 3.0, "queued": 2},
]
OLD = {
    "s-b": {"turn_id": "t-2", "held_s": 1.25, "queued": 0},
    "s-a": {"turn_id": "t-1", "held_s": 3.0, "queued": 2},
}


def _held(detail_lanes: object) -> list[str]:
    return [line for line in lanes_lines({"lanes": {"held_lanes": detail_lanes}}) if "held s-" in line]


def test_held_lanes_read_as_rows_or_as_the_old_map() -> None:
    assert (
        _held(ROWS)
        == _held(OLD)
        == [
            "  held s-a: t-1 for 3.0s, 2 queued behind",
            "  held s-b: t-2 for 1.2s, 0 queued behind",
        ]
    )
    assert [r["session_id"] for r in held_rows(OLD)] == ["s-a", "s-b"]
    assert held_rows(None) == [] == _held([])
