"""The scripted model the CLI tree tests talk to: the prompt's first word picks the reply.

``write NAME`` → a write_file call, ``read NAME`` → a read_file call, then a final text quoting the tool
results (so a denial's reason is visible in the next request); ``slow NAME`` → a text after a delay;
anything else → ``echo: <prompt>``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SLOW_S = 3.0


def _text(msg: dict[str, Any]) -> str:
    content = msg.get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict))


def make_reply(ws: Path):  # type: ignore[no-untyped-def]
    def reply(req: Any) -> Any:
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        last = msgs[-1] if msgs else {}
        content = last.get("content")
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            results = [b.get("content") for b in content if b.get("type") == "tool_result"]
            return {"text": f"done after: {json.dumps(results)[:400]}"}
        words = _text(last).split()
        verb, name = (words[0].lower(), words[-1]) if words else ("", "x")
        if verb == "write":
            path = str(ws / f"{name}.txt")
            return {"tool_calls": [{"name": "write_file", "input": {"file_path": path, "content": name}}]}
        if verb == "read":
            return {"tool_calls": [{"name": "read_file", "input": {"file_path": str(ws / f"{name}.txt")}}]}
        if verb == "slow":
            return {"text": f"slow answer {name}", "delay_s": SLOW_S}
        return {"text": "echo: " + " ".join(words)}

    return reply
