"""Regression guards on WORK, not time (issue 34): a real `geode serve` tree with ``GEODE_WORK_TALLY`` set
runs turns of 1 and 6 read-only tool rounds for one control-socket session, and the frames, validations,
thread hand-offs, store round trips, LMDB write transactions, checkpoint saves and timeline appends of each
process per tool round and per turn stay under the ceilings below (tests/perf/work_kit.py: how they are
counted).

A ceiling is what main measured when it was set (after issue 34's cuts), plus a small margin: a change that
adds a frame, a validation or a hand-off per round fails here and names the process and the measure. When a
change cuts work, lower the ceiling with it (the table is printed: ``pytest -s``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.perf.work_kit import MEASURES, ROLES, counted_tree, per_round_and_turn, render, run_windows

Ceilings = dict[str, dict[str, float]]  # role | "tree" -> measure -> most allowed
NAMES = [m[0] for m in MEASURES]  # frames decoded, frames encoded, validations, hand-offs, store round trips,
# LMDB write txns, LMDB write ops, checkpoint saves, timeline appends


def _row(*most: float) -> dict[str, float]:
    assert len(most) == len(NAMES)
    return dict(zip(NAMES, most, strict=True))


# Set from main at 06:49 UTC 2026-12-05 (python -m tests.perf.work_kit, after issue 34's cuts), plus a margin:
# per tool round + max(0.5, 10 %) (one stray event in every window is 0.2 a round), per turn + max(1, 10 %),
# a zero per turn stays zero. LMDB write txns get the ops' ceiling: group commit may batch fewer, never more.
# BUS (08:46 UTC): hand-offs per round 19 -> 5, per turn 69 -> 21 (requests and replies are sent by the
# threads that made them, not posted to the bus thread; left: a pool job per served request, a reply freed).
# BUS s4 (11:40 UTC): a caller reads its own reply (actors/bus/reply_reader.py): hand-offs per round 4.2 -> 1
# (loop 2 -> 0, executor 2.2 -> 1), per turn 14 -> 6 (loop 8 -> 2, lanes 2 -> 0).
PER_TOOL_ROUND: Ceilings = {
    "control": _row(1.5, 1.5, 1.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5),  # EVENTS s7: 1 frame in, 1 out (was 2)
    "lanes": _row(1.5, 1.5, 1.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5),  # EVENTS s7: 1 turn.events in, 1 out (was 2)
    "loop": _row(2.5, 3.5, 2.5, 0.5, 1.5, 0.5, 0.5, 0.5, 0.5),  # CHECKPOINT: 1 save; EVENTS s7: 1 out (was 2)
    "executor": _row(2.5, 2.5, 2.5, 1.5, 1.5, 0.5, 0.5, 0.5, 0.5),
    "store": _row(2.5, 2.5, 2.5, 0.5, 0.5, 2.5, 2.5, 1.5, 2.5),  # STORE s4: a call's rows 1 write op (was 2)
    "tree": _row(7, 8, 7, 1.5, 2.5, 2.5, 2.5, 1.5, 2.5),  # EVENTS s7: 6 in, 7 out (was 8, 10)
}
PER_TURN: Ceilings = {
    # EVENTS s7: 6 in, 7 out (a fast tool's round: 1 frame). LANESCTL s8: hand-offs 2 -> 1, no margin
    # (one prompt at a time on an idle connection: deterministic): the prompt is sent by control-socket, its
    # lanes reply continued by the bus thread (1: the reply), no pool job (actors/control.py counts them now)
    "control": _row(7, 8, 7, 1, 0, 0, 0, 0, 0),
    # EVENTS s7: 7 in, 9 out (were 8, 10). LANESCTL s8: hand-offs 1 -> 2: a turn's 2 record puts are continued
    # by the bus thread (actors/bus/continued.py), each reply counted as the bus's reply hand-off (to the
    # actor), where a lanes-store pool thread was woken to send it and wait (2 pool jobs a turn, not counted
    # before; geode/lanes/keyed_runner.py counts a pool job now). Deterministic: 2 puts a turn.
    "lanes": _row(8, 10, 8, 2, 3, 0, 0, 0, 0),
    "loop": _row(7, 9, 7, 3, 4, 0, 0, 0, 0),  # RECEIPTS s6: 3 trips (no list); EVENTS s7: 8 out (was 9)
    "executor": _row(2.5, 2.5, 2.5, 2, 2, 0, 0, 0, 0),  # LOOPTURN: no tool.plan.bind a turn (3 frames -> 2)
    "store": _row(11, 11, 11, 3, 0, 7, 7, 4, 6),  # LOOPTURN s4: 7 frames (was 10); STORE s4: 6 ops (was 7)
    "tree": _row(30, 36, 30, 7, 8, 7, 7, 4, 6),  # EVENTS s7: 27 in, 32 out (+10 %; were 35, 41)
}


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, dict[str, float]]]]:
    with counted_tree(tmp_path_factory.mktemp("work")) as (home, ws, tally):
        out = per_round_and_turn(run_windows(home, ws, tally))
    print("\n" + render(out))
    yield out


def _over(measured: dict[str, dict[str, float]], ceilings: Ceilings) -> list[str]:
    return [
        f"{role}: {name} {measured[role][name]:g} > {most:g}"
        for role, row in ceilings.items()
        for name, most in row.items()
        if measured[role][name] > most
    ]


def test_the_turns_ran_their_tool_rounds_through_every_process(
    figures: dict[str, dict[str, dict[str, float]]],
) -> None:
    rnd, turn = figures["per tool round"], figures["per turn"]
    assert rnd["executor"]["frames decoded"] >= 1, "no tool call reached the executor per round"
    assert rnd["store"]["checkpoint saves"] >= 1, "a tool round saved no checkpoint"
    for role in ROLES:
        assert turn[role]["frames decoded"] >= 1, f"{role} took no part in a turn: is the tally on?"


def test_work_per_tool_round_stays_under_its_ceilings(
    figures: dict[str, dict[str, dict[str, float]]],
) -> None:
    over = _over(figures["per tool round"], PER_TOOL_ROUND)
    assert not over, "more work per tool round than the guard allows:\n" + "\n".join(over)


def test_work_per_turn_stays_under_its_ceilings(figures: dict[str, dict[str, dict[str, float]]]) -> None:
    over = _over(figures["per turn"], PER_TURN)
    assert not over, "more work per one-round turn than the guard allows:\n" + "\n".join(over)


def test_every_role_and_measure_has_a_ceiling() -> None:
    for table in (PER_TOOL_ROUND, PER_TURN):
        assert set(table) == {*ROLES, "tree"}


def test_a_warm_loop_worker_starts_no_thread_per_turn_or_round(
    figures: dict[str, dict[str, dict[str, float]]],
) -> None:
    """LOOPTURN s5: a turn's actor and body, its model calls and tool batches run on reused threads (was 2
    threads started per turn: the turn's pykka actor and its body)."""
    turn, rnd = figures["per turn"]["loop"], figures["per tool round"]["loop"]
    assert (turn["threads started"], rnd["threads started"]) == (0, 0)
