"""The scripted provider itself: scenario files, callables, recording, exhaustion, thread safety, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request

import pytest

from geode.providers.types import ProviderError
from geode.testing.scenario import RecordedRequest, Scenario, ScriptedReply, load_scenario
from geode.testing.scripted import ScriptedServer
from tests.processes import Child
from tests.providers.conftest import build, request


def test_scenario_from_json_and_toml(tmp_path):
    j = tmp_path / "s.json"
    j.write_text(
        json.dumps(
            {
                "replies": [
                    "hi",
                    {"tool_calls": [{"name": "t", "input": {"a": 1}}]},
                    {"error": {"status": 429, "headers": {"retry-after": "1"}}},
                ]
            }
        )
    )
    sc = load_scenario(j)
    assert [r.text for r in sc.replies][:1] == ["hi"]
    assert sc.replies[1].tool_calls[0].input == {"a": 1}
    assert sc.replies[2].error.headers == {"retry-after": "1"}
    t = tmp_path / "s.toml"
    t.write_text('repeat_last = true\n[[replies]]\ntext = "from toml"\ndelay_s = 0.01\n')
    sc = load_scenario(t)
    assert sc.repeat_last and sc.replies[0].text == "from toml"
    (tmp_path / "list.json").write_text('["a", "b"]')
    assert len(load_scenario(tmp_path / "list.json").replies) == 2


def test_callable_scenario_sees_the_request(server, fake_time):
    seen: list[RecordedRequest] = []

    def reply(req: RecordedRequest) -> ScriptedReply:
        seen.append(req)
        last = req.body["messages"][-1]["content"][0]["text"]
        return ScriptedReply(text=f"echo: {last}")

    server.set_scenario(reply)
    resp = build("anthropic-messages", server, fake_time).complete(request("anthropic-messages", text="ping"))
    assert resp.text == "echo: ping"
    assert seen[0].wire == "anthropic-messages" and seen[0].method == "POST"


def test_exhausted_scenario_is_a_terminal_error(server, fake_time):
    server.set_scenario(Scenario.of("only one"))
    adapter = build("openai-chat", server, fake_time)
    adapter.complete(request("openai-chat"))
    with pytest.raises(ProviderError, match="exhausted"):
        adapter.complete(request("openai-chat"))
    assert len(server.requests) == 2  # x-should-retry: false on the exhaustion reply


def test_concurrent_requests_are_all_recorded(server, fake_time):
    server.set_scenario(Scenario(replies=(ScriptedReply(text="same", delay_s=0.05),), repeat_last=True))
    adapter = build("openai-responses", server, fake_time)
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda: results.append(adapter.complete(request("openai-responses")).text))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert results == ["same"] * 8
    assert sorted(r.index for r in server.requests) == list(range(8))


def test_cli_prints_base_url_and_serves(tmp_path):
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps(["hello from the CLI"]))
    proc = Child(
        [sys.executable, "-m", "actors.cli.main", "scripted-provider", "--scenario", str(scenario)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        body = json.dumps(
            {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        ).encode()
        req = urllib.request.Request(
            f"{base_url}/v1/messages", data=body, headers={"content-type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert json.loads(resp.read())["content"][0]["text"] == "hello from the CLI"
    finally:
        proc.terminate()
        assert proc.wait(timeout=5) == 0


def test_start_stop_base_url():
    srv = ScriptedServer(Scenario.of("x"))
    with pytest.raises(RuntimeError):
        _ = srv.base_url
    with srv:
        assert srv.openai_base_url.endswith("/v1")


def test_cli_with_a_reply_function(tmp_path):
    (tmp_path / "my_replies.py").write_text("def reply(req):\n    return {'text': 'fn saw ' + req.wire}\n")
    import os

    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = Child(
        [sys.executable, "-m", "actors.cli.main", "scripted-provider", "--function", "my_replies:reply"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        base_url = proc.stdout.readline().strip()
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
        req = urllib.request.Request(
            f"{base_url}/v1/chat/completions", data=body, headers={"content-type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert json.loads(resp.read())["choices"][0]["message"]["content"] == "fn saw openai-chat"
    finally:
        proc.terminate()
        assert proc.wait(timeout=5) == 0


@pytest.mark.parametrize("wire", ["anthropic-messages", "openai-chat", "openai-responses"])
def test_a_reply_made_only_of_chunks_arrives_whole(server, fake_time, wire):
    server.set_scenario(Scenario.of({"chunks": ["Hel", "lo ", "there"]}))
    resp = build(wire, server, fake_time).complete(request(wire))
    assert resp.text == "Hello there"
