"""Issue 10 findings 2 and 8 against a real `geode serve` tree and the scripted model: what the model sees
(the tool_result in its next request) after grep_files/glob_files over a workspace with a symlink to
/etc/passwd and a symlinked directory pointing out, and after read_file/grep_files on a workspace that
contains GEODE_HOME (the default layout: cwd ``~``, home ``~/.geode``).

Issue 26 (file tools read other GEODE homes and credentials; results unredacted): the daemon runs with a fake
``HOME`` inside the workspace holding ``~/.codex/auth.json`` and an ssh key, the workspace holds another GEODE
home and hardlinks to the home's ``.env`` and to the codex file; a GitHub token and a ``.env`` value in
workspace files reach the model masked through read_file and run_bash."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_tree

KEY = "sk-test-key"  # what scripted_home writes into the home's .env
OTHER = "other-home-secret-0a1b2c"  # the other GEODE home's .env and host key
CODEX = "codex-secret-3d4e5f"  # the daemon user's ~/.codex/auth.json
GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token in a workspace file
PLAIN = "plainvalue-nothing-like-a-key-42"  # a .env value with no secret shape


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
    other = ws / "proj" / "other-home"  # another GEODE home, by its markers
    (other / "keys").mkdir(parents=True)
    (other / "records").mkdir()
    (other / "config.toml").write_text("")
    (other / ".env").write_text(f"ANTHROPIC_API_KEY={OTHER}\n")
    (other / "keys" / "host.secret").write_text(f"{OTHER}\n")
    user = ws / "userhome"  # the daemon's HOME
    (user / ".codex").mkdir(parents=True)
    (user / ".ssh").mkdir()
    (user / ".codex" / "auth.json").write_text(json.dumps({"note": CODEX}))
    (user / ".ssh" / "id_ed25519").write_text(f"not a real key {CODEX}\n")
    os.link(user / ".codex" / "auth.json", ws / "codex-copy.json")
    (ws / "tok.txt").write_text(f"token for the bot: {GHP}\n")
    (ws / "plain.txt").write_text(f"value {PLAIN}\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(user))  # the served tree's and the CLI's
        with scripted_tree(ws, _reply, ws, cwd=ws) as (home, server):
            assert home.root.is_relative_to(ws) and KEY in home.env_file.read_text()
            with home.env_file.open("a") as f:
                f.write(f"CUSTOM_VALUE={PLAIN}\n")
            os.link(home.env_file, ws / "envlink")  # a hardlink: the same file, another path
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
    assert KEY not in json.dumps(block) and OTHER not in json.dumps(block)
    seen = _payload(block)
    # the home (gh), the other home (proj/other-home) and the hardlink to the home's .env (envlink)
    assert "matches" in seen and seen["matches"] == [] and seen["skipped_geode_home"] == 3, seen


def _denied(block: dict[str, Any], reason: str, *secrets: str) -> None:
    seen = _payload(block)
    assert block.get("is_error") and seen["reason"] == reason, seen
    assert not any(s in json.dumps(block) for s in secrets), block


def test_read_file_of_another_geode_homes_env_and_host_key_is_denied(tree: Tree) -> None:
    for path in ("proj/other-home/.env", "proj/other-home/keys/host.secret"):
        _denied(tree.model_sees("read_file", {"file_path": path}), "geode_home", OTHER)


def test_read_file_of_the_daemon_users_codex_auth_is_denied_also_through_a_hardlink(tree: Tree) -> None:
    for path in ("~/.codex/auth.json", "codex-copy.json", "userhome/.ssh/id_ed25519"):
        _denied(tree.model_sees("read_file", {"file_path": path}), "credential_file", CODEX)


def test_read_file_of_a_hardlink_to_the_homes_env_is_denied(tree: Tree) -> None:
    _denied(tree.model_sees("read_file", {"file_path": "envlink"}), "geode_home", KEY, PLAIN)


def test_grep_skips_another_home_and_credential_files_and_counts_them(tree: Tree) -> None:
    block = tree.model_sees("grep_files", {"pattern": "secret", "path": "."})
    seen = _payload(block)
    assert OTHER not in json.dumps(block) and CODEX not in json.dumps(block), seen
    # ~/.codex/auth.json, its hardlink codex-copy.json, ~/.ssh/id_ed25519
    assert seen["skipped_credential_files"] == 3 and seen["skipped_geode_home"] == 3, seen
    listed = _payload(tree.model_sees("glob_files", {"pattern": "**/*"}))
    assert not any("other-home/" in f or "auth.json" in f for f in listed["files"]), listed


def test_a_token_and_a_dotenv_value_reach_the_model_masked(tree: Tree) -> None:
    """Through read_file and through run_bash's output: masked and counted in the tool_result the
    scripted provider received."""
    read = _payload(tree.model_sees("read_file", {"file_path": "tok.txt"}))
    assert GHP not in read["content"] and "[REDACTED:github-token]" in read["content"], read
    assert read["redacted"] == {"github-token": 1}, read
    bash = tree.model_sees("run_bash", {"command": "cat tok.txt plain.txt"})
    text = json.dumps(bash)
    assert GHP not in text and PLAIN not in text, bash
    assert "[REDACTED:github-token]" in text and "[REDACTED:env:CUSTOM_VALUE]" in text, bash
