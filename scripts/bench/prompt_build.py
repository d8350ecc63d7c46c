"""Prompt build time and request size with 10 skills and memory at its cap, against the same session with
neither (issue 32's acceptance), in one run.

Run: .venv/bin/python scripts/bench/prompt_build.py [--iterations 300] [--skills 10]
Two temporary homes, one empty and one with ``--skills`` skill folders in ``$GEODE_HOME/skills/`` (each a
SKILL.md with a description of ~40 words, a body of ~600 words, a script and a reference file, as a public
Claude Code skill has) and the operator's ``memory/MEMORY.md`` filled to ``[memory] max_bytes``. For each, a
turn of an operator (IPC) session over the built-in catalogue is timed through the path the loop worker
takes: ``compose_turn`` (settings, plan, prompt sources: the skills found and parsed, the memory read) and
``build_system_prompt`` (what ``prepare_call`` does for each model call); the request size is the system
prompt plus the tool schemas as JSON, the bytes a provider adapter sends before any message. Memory is
counted when geode/memory's prompt block is wired into ``compose_turn`` (the run says which). Parsed skills
are remembered while their SKILL.md is unchanged; the ``(cold)`` row parses every SKILL.md each time (the
first turn of a loop worker, or after an edit).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from actors.tree.config_sections import TreeSettings
from geode.home import GeodeHome
from geode.prompt.builder import build_system_prompt
from geode.protocol import turns
from geode.sessions.turn_setup import compose_turn
from geode.skills.catalogue import _PARSED as parsed
from geode.tools.builtin.catalogue import builtin_specs
from geode.tools.plan import PlanRegistry

WORDS = "form field value page table chart report invoice merge split extract rotate render sign".split()


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _fill(home: GeodeHome, skills: int, memory_bytes: int, rng: random.Random) -> None:
    for i in range(skills):
        folder = home.root / "skills" / f"skill-{i:02d}"
        (folder / "scripts").mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: skill-{i:02d}\ndescription: {_text(rng, 40)}\nallowed-tools: Read, Grep, Bash\n"
            f"license: Apache-2.0\n---\n# Skill {i}\n\n{_text(rng, 600)}\n"
        )
        (folder / "scripts" / "run.sh").write_text("#!/bin/sh\necho ok\n")
        (folder / "reference.md").write_text(_text(rng, 2000) + "\n")
    mem = home.root / "memory" / "MEMORY.md"
    mem.parent.mkdir(parents=True, exist_ok=True)
    lines, size = [], 0
    while True:
        line = f"- {_text(rng, 12)}\n"
        if size + len(line.encode()) > memory_bytes:
            break
        lines.append(line)
        size += len(line.encode())
    mem.write_text("".join(lines))


def _time(
    home: GeodeHome, ws: Path, config: TreeSettings, iterations: int, cold: bool = False
) -> tuple[list[float], int, dict]:
    catalogue = PlanRegistry().compile(list(builtin_specs()))
    run = turns.TurnRun(
        turn_id="t1",
        session_id="s1",
        mode="IPC",
        settings={"workspace": str(ws), "model": "claude-sonnet-5", "scope": "operator"},
    )
    times: list[float] = []
    for _ in range(iterations):
        if cold:  # every SKILL.md parsed again (a changed file, or the first turn of a process)
            parsed.clear()
        t0 = time.perf_counter()
        turn = compose_turn(run, config, catalogue=catalogue, rules_dir=home.rules_dir)
        system = build_system_prompt(turn.prompt, model="claude-sonnet-5", provider="anthropic")
        times.append(time.perf_counter() - t0)
    tools = turn.plan.tool_schemas() if turn.plan is not None else ()
    size = sum(len(s.text.encode()) for s in system) + len(
        json.dumps([t.model_dump() for t in tools]).encode()
    )
    parts = {s.name: len(s.text.encode()) for s in system}
    return times, size, parts


def _pct(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--skills", type=int, default=10)
    args = ap.parse_args()
    rng = random.Random(32)
    config = TreeSettings.from_raw({})
    cap = int(getattr(getattr(config, "memory", None), "max_bytes", 25 * 1024))
    with tempfile.TemporaryDirectory(prefix="prompt-bench-") as tmp:
        base = Path(tmp)
        ws = base / "ws"
        ws.mkdir()
        bare = GeodeHome(base / "bare").ensure()
        full = GeodeHome(base / "full").ensure()
        _fill(full, args.skills, cap, rng)
        rows = []
        both = f"{args.skills} skills + memory at cap"
        for label, home, cold in (
            ("neither", bare, False),
            (both, full, False),
            (both + " (cold)", full, True),
        ):
            _time(home, ws, config, 5)  # warm: imports, first parse
            times, size, parts = _time(home, ws, config, args.iterations, cold)
            rows.append((label, times, size, parts))
    memory_on = "agent_memory" in rows[1][3]
    print(f"iterations {args.iterations}; memory cap {cap} bytes; memory block in the prompt: {memory_on}")
    print(f"{'session':34} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'request bytes':>14}")
    for label, times, size, _parts in rows:
        mean = statistics.fmean(times) * 1000
        print(f"{label:34} {_pct(times, 0.5):8.2f} {_pct(times, 0.99):8.2f} {mean:8.2f} {size:14,d}")
    for label, _t, _s, parts in rows[:2]:
        print(f"  {label}: " + ", ".join(f"{k} {v:,d} B" for k, v in parts.items()))


if __name__ == "__main__":
    main()
