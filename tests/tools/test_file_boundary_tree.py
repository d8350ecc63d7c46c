"""Issue 10 findings 2 and 8 against a real `geode serve` tree and the scripted model: what the model sees
(the tool_result in its next request) after grep_files/glob_files over a workspace with a symlink to
/etc/passwd and a symlinked directory pointing out, and after read_file/grep_files on a workspace that
contains GEODE_HOME (the default layout: cwd ``~``, home ``~/.geode``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.providers.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_tree

KEY = "sk-test-key"  # what scripted_home writes into the home's .env


def _reply(req: Any) -> Any:
    """The prompt is ``CALL {"name": ..., "input": ...}``: propose that call; after its result: done."""
    msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
    content = msgs[-1].get("content") if msgs else None
    if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
        return {"text": "done"}
    text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [])
    call = json.loads(text.split("CALL", 1)[1])
    return {"tool_calls": [call]}


@dataclass
class Tree:
    home: GeodeHome
    server: ScriptedServer
    ws: Path
    outside: Path

    def model_sees(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """Run one tool call proposed by the model; return the tool_result block it got back."""
        self.server.clear()
        prompt = "CALL " + json.dumps({"name": name, "input": args})
        skip = "--dangerously-skip-permissions"
        r = geode(self.home, "ask", prompt, "--json", skip, cwd=self.ws, timeout=90)
        assert r.returncode == 0, r.stdout + r.stderr
        for rec in self.server.requests:
            msgs = rec.body.get("messages", []) if isinstance(rec.body, dict) else []
            last = msgs[-1].get("content") if msgs else None
            for block in last if isinstance(last, list) else []:
                if block.get("type") == "tool_result":
                    return block
        raise AssertionError(f"the model never got a tool_result: {r.stdout}")


def _payload(block: dict[str, Any]) -> dict[str, Any]:
    content = block.get("content")
    if isinstance(content, list):
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return json.loads(content) if isinstance(content, str) else dict(content or {})


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    ws = tmp_path_factory.mktemp("fbtree")  # the workspace; the home is ws/gh (inside it)
    outside = tmp_path_factory.mktemp("fbout")
    (outside / "outside-secret.txt").write_text("outside secret\n")
    (ws / "link").symlink_to("/etc/passwd")
    (ws / "out").symlink_to(outside, target_is_directory=True)
    (ws / "mine.txt").write_text("root: mine\n")
    with scripted_tree(ws, _reply, ws, cwd=ws) as (home, server):
        assert home.root.is_relative_to(ws) and KEY in home.env_file.read_text()
        yield Tree(home, server, ws, outside)


def test_grep_does_not_return_etc_passwd_through_a_symlink(tree: Tree) -> None:
    assert "root:x:0:0" in Path("/etc/passwd").read_text()
    block = tree.model_sees("grep_files", {"pattern": "^root:", "path": "."})
    seen = _payload(block)
    assert f"{tree.ws / 'mine.txt'}:1:root: mine" in seen["matches"], seen  # the grep really ran
    assert "root:x:0:0" not in json.dumps(block)
    assert seen["skipped_outside_roots"] >= 2  # link and out


def test_glob_lists_nothing_through_a_symlinked_directory_pointing_out(tree: Tree) -> None:
    for pattern in ("out/*", "**/*secret*"):
        block = tree.model_sees("glob_files", {"pattern": pattern})
        seen = _payload(block)
        assert "files" in seen, seen
        assert "outside-secret" not in json.dumps(block) and str(tree.outside) not in json.dumps(block)


def test_read_file_of_the_homes_env_is_denied(tree: Tree) -> None:
    block = tree.model_sees("read_file", {"file_path": "gh/.env"})
    assert KEY not in json.dumps(block)
    seen = _payload(block)
    assert block.get("is_error") and seen["reason"] == "geode_home", seen


def test_grep_over_a_workspace_containing_the_home_does_not_return_the_key(tree: Tree) -> None:
    block = tree.model_sees("grep_files", {"pattern": "ANTHROPIC_API_KEY", "path": "."})
    assert KEY not in json.dumps(block)
    seen = _payload(block)
    assert "matches" in seen and seen["skipped_geode_home"] == 1, seen
