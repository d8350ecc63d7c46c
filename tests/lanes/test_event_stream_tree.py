"""A K-round turn's stream through a real `geode serve` tree is the same list of events however the loop
groups them into frames (issue 34: the loop sends the events it produces back to back as one
``turn.events``, lanes relays them as one ``origin.events``): every event once, in the loop's order, with
lanes' seq one more each time, as the client (`geode ask`'s ControlClient) and `geode ask --output-format
stream-json` see it. The same test passes on the tree before the change (one frame per event).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.cli.client import ControlClient
from geode.home import GeodeHome
from tests.actors.tree_kit import geode, scripted_tree
from tests.perf.work_kit import reply

K = 4  # tool rounds


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, Path]]:
    base = tmp_path_factory.mktemp("stream")
    ws = base / "ws"
    ws.mkdir()
    for i in range(K + 1):
        (ws / f"data-{i}.txt").write_text(f"line {i}\n")
    with scripted_tree(base, reply, ws, cwd=ws) as (home, _server):
        yield home, ws


def _expected_kinds(k: int) -> list[str]:
    """The turn's events but the checkpoint notes and ``turn_queued`` (their number is the checkpoint policy's
    and the admission's, not this change's)."""
    one = ["round_start", "tokens", "tool_start", "tool_end"]
    return [
        "turn_started",
        *one * k,
        "round_start",
        "text_delta",
        "tokens",
        "verify",
        "termination",
        "turn_done",
    ]


def test_a_k_round_turns_stream_is_every_event_once_in_order(tree: tuple[GeodeHome, Path]) -> None:
    home, ws = tree
    cl = ControlClient(home, client_version="event-stream-test")
    cl.connect(timeout_s=60.0, cwd=str(ws), is_tty=False, dangerously_skip_permissions=True, mode="IPC")
    seen: list[dict[str, Any]] = []
    try:
        result = cl.run_prompt(f"list them rounds={K}", on_event=seen.append, timeout_s=120)
    finally:
        cl.close()
    assert result.get("termination_reason") == "natural", result
    mine = [e for e in seen if e["turn_id"] == result["turn_id"]]
    seqs = [e["seq"] for e in mine]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs  # no gap, no repeat, in order
    kinds = [e["kind"] for e in mine if e["kind"] not in ("checkpoint_saved", "turn_queued")]
    assert kinds == _expected_kinds(K), kinds
    assert [e["data"]["round"] for e in mine if e["kind"] == "round_start"] == list(range(K + 1))
    starts = [e["data"]["id"] for e in mine if e["kind"] == "tool_start"]
    assert starts == [e["data"]["id"] for e in mine if e["kind"] == "tool_end"] and len(set(starts)) == K
    pending = [e for e in mine if e["kind"] == "checkpoint_saved" and e["data"]["phase"] == "pending_batch"]
    assert len(pending) == K  # each batch written ahead of its tool, and said so, before the tool's start
    for p in pending:
        after = mine[mine.index(p) + 1 :]
        assert next(e["kind"] for e in after if e["kind"] in ("tool_start", "round_start")) == "tool_start"


def test_geode_ask_stream_json_says_each_round(tree: tuple[GeodeHome, Path]) -> None:
    home, ws = tree
    r = geode(home, "ask", f"again rounds={K}", "--output-format", "stream-json", cwd=ws, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    shape = [(x["type"], x.get("subtype") or _block(x)) for x in lines]
    round_ = [("assistant", "tool_use"), ("user", "tool_result")]
    answer = [("stream_event", None), ("assistant", "text"), ("result", None)]  # streamed, then whole
    assert shape == [("system", "init"), *round_ * K, *answer], shape
    assert lines[-1]["termination_reason"] == "natural" and lines[-1]["tool_call_count"] == K


def _block(line: dict[str, Any]) -> str | None:
    content = (line.get("message") or {}).get("content") or [{}]
    return content[0].get("type") if isinstance(content, list) else None
