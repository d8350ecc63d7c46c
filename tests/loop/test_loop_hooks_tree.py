"""A real `geode serve` tree with `[hooks]` command hooks in config.toml: a PostVerify hook that blocks an
answer makes the turn revise it (or, when the model never complies, withholds it); a Stop hook runs at the
end of an accepted turn (it writes a file the test reads)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_tree

BLOCK_REASON = "cite a source for the claim"

POST_VERIFY = f"""
import json, sys
payload = json.load(sys.stdin)
if "UNSOURCED" in payload.get("candidate_summary", ""):
    print({BLOCK_REASON!r}, file=sys.stderr)
    sys.exit(2)
"""

STOP = """
import json, pathlib, sys
payload = json.load(sys.stdin)
out = pathlib.Path(sys.argv[1]) / (payload["session_id"] + ".json")
out.write_text(json.dumps(payload))
"""


@dataclass
class Rig:
    home: GeodeHome
    model: ScriptedServer
    ws: Path
    stops: Path


def _text(msg: dict[str, Any]) -> str:
    content = msg.get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict))


def _reply(req: Any) -> Any:
    msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
    first = _text(msgs[0])
    told = BLOCK_REASON in json.dumps(req.body)  # the hook's reason came back as the revise instruction
    if first.startswith("REVISE:"):
        return {"text": "the claim [source: the manual]" if told else "UNSOURCED claim"}
    if first.startswith("STUBBORN:"):
        return {"text": "UNSOURCED claim, again"}
    return {"text": "plain answer"}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    base = tmp_path_factory.mktemp("loophooks")
    ws, stops = base / "ws", base / "stops"
    ws.mkdir()
    stops.mkdir()
    (base / "post_verify.py").write_text(POST_VERIFY)
    (base / "stop.py").write_text(STOP)
    py = sys.executable
    extra = f"""
[[hooks.PostVerify]]
command = "{py} {base / "post_verify.py"}"
timeout = 20
[[hooks.Stop]]
command = "{py} {base / "stop.py"} {stops}"
timeout = 20
"""
    with scripted_tree(base, _reply, ws, extra=extra, cwd=ws) as (home, model):
        yield Rig(home, model, ws, stops)


def _ask(rig: Rig, prompt: str) -> dict[str, Any]:
    r = geode(rig.home, "ask", prompt, "--json", cwd=rig.ws, timeout=120)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return json.loads(r.stdout)


def test_a_post_verify_block_makes_the_turn_revise_its_answer(rig: Rig) -> None:
    out = _ask(rig, "REVISE: what does the manual say?")
    assert out["termination_reason"] == "natural", out
    assert out["text"] == "the claim [source: the manual]", out
    revised = [r for r in rig.model.requests if "REVISE:" in json.dumps(r.body)]
    assert len(revised) == 2 and BLOCK_REASON in json.dumps(revised[1].body), revised


def test_a_post_verify_block_the_model_ignores_withholds_the_answer(rig: Rig) -> None:
    out = _ask(rig, "STUBBORN: what does the manual say?")
    assert out["termination_reason"] == "external_verification_required", out
    assert "UNSOURCED" not in (out.get("text") or ""), out


def test_a_stop_hook_runs_when_a_turn_is_accepted(rig: Rig) -> None:
    before = set(rig.stops.iterdir())
    out = _ask(rig, "STOP: hello")
    assert out["text"] == "plain answer", out
    (written,) = set(rig.stops.iterdir()) - before
    payload = json.loads(written.read_text())
    assert payload["hook_event_name"] == "Stop" and payload["policy_action"] == "accept", payload
    assert payload["candidate_summary"] == "plain answer" and payload["session_id"] == written.stem
