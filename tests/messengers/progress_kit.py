"""What the live-progress tree tests share: the scripted model whose steps wait on the test's events (no
sleeps), the 12,000-character answer in paragraphs, and the status message's opening words."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tests.messengers.chat_tree_kit import prompt_of

STATUS = "⏳ Working"
PARAGRAPHS = [  # three lines each: a split on line boundaries alone would cut one
    f"Paragraph {i}: " + "\n".join(" ".join(f"w{i}-{j}" for j in range(k, k + 50)) for k in (0, 50, 100))
    for i in range(13)
]
LONG = "\n\n".join(PARAGRAPHS)  # ~12,000 characters


class Model:
    """ "slow <tag>": write_file (approved in the chat), then waits for the tag's release before answering;
    "wait <tag>": waits for the release at once; "long": the 12,000-character answer; else an echo."""

    def __init__(self, ws: Path) -> None:
        self.ws = ws
        self.gates: dict[str, threading.Event] = {}
        self.lock = threading.Lock()

    def gate(self, tag: str) -> threading.Event:
        with self.lock:
            return self.gates.setdefault(tag, threading.Event())

    def __call__(self, req: Any) -> Any:
        prompt = prompt_of(req)
        last = req.body["messages"][-1].get("content")
        after_tool = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
        verb, _, tag = prompt.partition(" ")
        if verb == "slow" and not after_tool:
            return {
                "tool_calls": [
                    {"name": "write_file", "input": {"file_path": str(self.ws / tag), "content": "x"}}
                ]
            }
        if verb in ("slow", "wait"):
            self.gate(tag).wait(90)  # the test releases it (bounded: a stuck test ends, it does not hang)
            return {"text": f"done {tag}"}
        if verb == "long":
            return {"text": LONG}
        return {"text": f"echo: {prompt}"}
