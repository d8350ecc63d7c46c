"""Any server that speaks the wire works: a bare handler returning the minimal bodies from dependencies.md."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from geode.config_schema import GeodeConfig
from geode.providers.selection import build_provider
from tests.providers.conftest import request

MINIMAL = {
    "/v1/messages": {
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}],
        "stop_reason": "tool_use",
    },
    "/v1/chat/completions": {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                },
            }
        ]
    },
    "/v1/responses": {
        "output": [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_9",
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
                "status": "completed",
            }
        ]
    },
}


class Minimal(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        data = json.dumps(MINIMAL[self.path]).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def foreign() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Minimal)
    t = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize(
    ("model", "env_name", "suffix", "call_id"),
    [
        ("claude-opus-5-5", "ANTHROPIC_BASE_URL", "", "toolu_1"),
        ("glm-5.3", "ZAI_BASE_URL", "/v1", "call_1"),
        ("gpt-6-sol", "OPENAI_BASE_URL", "/v1", "call_9"),
    ],
)
def test_minimal_foreign_server(foreign, tmp_path, model, env_name, suffix, call_id):
    env = {env_name: foreign + suffix, "CODEX_HOME": str(tmp_path)}
    resp = build_provider(model, env=env, config=GeodeConfig()).complete(
        request("openai-chat", stream=False).model_copy(update={"model": model})
    )
    assert [(c.id, c.name, c.input) for c in resp.tool_calls] == [(call_id, "get_weather", {"city": "Paris"})]
    assert resp.stop_reason.value == "tool_use"
