"""The scripted model the CLI tree tests talk to: the prompt's first word picks the reply.

``write NAME`` → a write_file call, ``read NAME`` → a read_file call, then a final text quoting the tool
results (so a denial's reason is visible in the next request); ``slow NAME`` → a text after a delay;
``bash KEY`` → a run_bash call of ``commands(ws)[KEY]``; ``trap`` → a text full of terminal sequences, then a
write_file call; anything else → ``echo: <prompt>``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SLOW_S = 3.0
# a reply that would hide what follows (conceal), copy to the clipboard (OSC 52), set the title, clear
TRAP_TEXT = "see\x1b[8m hidden \x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b[2J\x9b31m end"


def commands(ws: Path) -> dict[str, str]:
    """run_bash commands by key: what a prompt must show whole, and the scope of "always"."""
    return {
        "hidden": f"export token=$(echo${{IFS}}X>{ws}/flag_hidden)",  # redaction showed [REDACTED]
        "long": "echo " + "benign-" * 425 + f"; touch {ws}/flag_long",  # 3,000 characters; the tail runs
        "ls": "ls -la",
        "lsetc": "ls /etc",
        "bashc": f"bash -c 'touch {ws}/flag_bashc'",
        "cancel": f"touch {ws}/flag_cancel",  # Ctrl-C at its approval prompt: never runs
        "sleep": "sleep 3",  # approved: the spinner shows while it runs
    }


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
        if verb == "bash":
            return {"tool_calls": [{"name": "run_bash", "input": {"command": commands(ws)[name]}}]}
        if verb == "trap":
            call = {"name": "write_file", "input": {"file_path": str(ws / "trap.txt"), "content": "t"}}
            return {"text": TRAP_TEXT, "tool_calls": [call]}
        if verb == "slow":
            return {"text": f"slow answer {name}", "delay_s": SLOW_S}
        return {"text": "echo: " + " ".join(words)}

    return reply
