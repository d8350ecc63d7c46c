"""The shipped offline example model (``geode.testing.offline_model``) on the OpenAI Chat wire (the README
test drives the Anthropic one through a real chat), and ``scripted-provider --function`` with a bad name."""

from __future__ import annotations

import re
import subprocess
import sys

from geode.testing.offline_model import reply
from geode.testing.scenario import RecordedRequest
from tests.actors.tree_kit import ROOT

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in ("read_file", "list_dir")]


def _req(messages: list[dict[str, object]], tools: list[dict[str, object]] = TOOLS) -> RecordedRequest:
    body = {"model": "gpt-x", "messages": messages, "tools": tools}
    return RecordedRequest(
        method="POST", path="/v1/chat/completions", wire="openai-chat", headers={}, body=body
    )


def test_openai_chat_a_tool_call_then_its_result_quoted() -> None:
    first = reply(_req([{"role": "system", "content": "s"}, {"role": "user", "content": "read notes.md"}]))
    assert first["tool_calls"] == [{"name": "read_file", "input": {"file_path": "notes.md"}}]
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    result = '{"file_path": "/w/notes.md", "content": "     1\\tremember the milk", "lines": 1}'
    msgs = [
        {"role": "user", "content": "read notes.md"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
    ]
    text = reply(_req(msgs))["text"]
    assert text.startswith("read_file returned:") and "remember the milk" in text


def test_a_tool_the_request_does_not_offer_is_not_proposed() -> None:
    out = reply(_req([{"role": "user", "content": "run rm -rf /tmp/x"}]))
    assert "tool_calls" not in out and "run_bash is not offered" in out["text"]
    echoed = reply(_req([{"role": "user", "content": "how are you"}]))
    assert echoed["text"].startswith("You said: how are you") and "read FILE" in echoed["text"]


def test_a_bad_function_name_is_one_line_not_a_traceback() -> None:
    cmd = [sys.executable, "-m", "actors.cli.main", "scripted-provider", "--function", "geode.providers.nope"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    said = " ".join(re.sub(r"[│╭╮╰╯─]", " ", r.stderr).split())  # rich's error box, unwrapped
    assert r.returncode == 2 and "No module named 'geode.providers.nope'" in said, r.stderr
    assert "Traceback" not in r.stderr
