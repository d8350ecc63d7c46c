"""The chaos harness's world: a scripted model whose every turn appends one unique marker line to a file
outside the records (via run_bash), and a served `geode serve` tree in a fresh GEODE_HOME."""

from __future__ import annotations

import itertools
import json
import re
import shlex
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geode.home import GeodeHome
from geode.redaction import fingerprint
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import serve, stop
from tests.chaos.chat import chat_config, chat_ids
from tests.chaos.schedule import PROMPT, job_config

TAG = re.compile(r"chaos-turn-(\S+)")
# No [supervisor] overrides by default: the run proves the shipped restart policy (per-child intensity, a
# tree-wide storm guard), which is what a user gets; --supervisor "k=v;..." tries other settings.
DEFAULT_SUPERVISOR = ""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def _last_prompt(msgs: list[dict[str, Any]]) -> str:
    """The turn's own prompt: the last user message that is not tool results (a chat's session holds the
    chat's earlier turns before it)."""
    for msg in reversed(msgs):
        if msg.get("role") == "user" and not _tool_results(msg.get("content")):
            return _text_of(msg.get("content"))
    return ""


def _tool_results(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


class MarkerModel:
    """The model: a chat's prompt ``chaos-turn-chat<N>-<n>`` → the text ``replied <tag>``; any other turn
    prompt ``chaos-turn-<tag>`` → one run_bash call appending ``<tag> <call id>`` to the
    marker file (an O_APPEND write of one short line: atomic, so every execution is exactly one line;
    write_file would overwrite and edit_file read-modify-write would race between concurrent turns) → after
    the tool result, the answer ``applied <tag>`` or ``not-applied <tag>: <why>``. The scheduled job's
    prompt (tests/chaos/schedule.py) → one run_bash call appending ``job <call id>`` to ``job_effects``
    (``calls`` keeps each call's receipt fingerprint) → ``applied <call id>``."""

    def __init__(self, markers: Path, job_effects: Path | None = None) -> None:
        self.markers = markers
        self.job_effects = job_effects or markers.with_name("job-effects.log")
        self.calls: dict[str, str] = {}  # the job's call id → fingerprint of its run_bash call
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def _job(self, msgs: list[dict[str, Any]]) -> Any:
        results = _tool_results(msgs[-1].get("content"))
        if results:
            r = results[-1]
            if r.get("is_error"):
                return {"text": f"not-applied {r.get('tool_use_id')}: {json.dumps(r.get('content'))[:200]}"}
            return {"text": f"applied {r.get('tool_use_id')}"}
        with self._lock:
            call_id = f"toolu_chaos_job_{next(self._ids)}"
        line = shlex.quote(f"job {call_id}")
        args = {"command": f"printf '%s\\n' {line} >> {shlex.quote(str(self.job_effects))}"}
        with self._lock:
            self.calls[call_id] = fingerprint({"tool_name": "run_bash", "arguments": args})
        return {"tool_calls": [{"id": call_id, "name": "run_bash", "input": args}]}

    def __call__(self, req: Any) -> Any:
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        if not msgs:
            return {"text": "no messages"}
        prompt = _last_prompt(msgs)
        if prompt.strip() == PROMPT:
            return self._job(msgs)
        m = TAG.search(prompt)
        tag = m.group(1) if m else "untagged"
        results = _tool_results(msgs[-1].get("content"))
        if tag.startswith("chat") and not results:
            return {"text": f"replied {tag}"}  # a chat's turn: its effect is the reply the bot posts
        if results:
            r = results[-1]
            body = json.dumps(r.get("content"))[:200]
            if r.get("is_error"):
                return {"text": f"not-applied {tag}: {body}"}
            return {"text": f"applied {tag}"}
        with self._lock:
            call_id = f"toolu_chaos_{tag}_{next(self._ids)}"
        line = shlex.quote(f"{tag} {call_id}")
        command = f"printf '%s\\n' {line} >> {shlex.quote(str(self.markers))}"
        return {"tool_calls": [{"id": call_id, "name": "run_bash", "input": {"command": command}}]}


@dataclass
class World:
    home: GeodeHome
    server: ScriptedServer
    ws: Path
    markers: Path
    api: LocalBotApi | None = None  # the local Telegram server of the chats (None: no chat)
    chats: list[int] = field(default_factory=list)
    model: MarkerModel | None = None


def read_markers(markers: Path) -> list[tuple[str, str]]:
    """Every marker line as (tag, call id)."""
    if not markers.exists():
        return []
    out = []
    for line in markers.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            out.append((parts[0], parts[1]))
    return out


@contextmanager
def world(
    base: Path, *, workers: int = 2, supervisor: str = DEFAULT_SUPERVISOR, chats: int = 0, job: bool = False
) -> Iterator[World]:
    """A served tree (cwd and tool root ``base/ws``) over a MarkerModel, its messengers child bound to
    ``chats`` chats of a local Telegram server, with ``job`` the chaos job delivering to the first chat;
    stopped on exit."""
    ws = base / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    markers = base / "markers.log"  # outside the records (GEODE_HOME), inside the tools' root
    model = MarkerModel(markers)
    server = ScriptedServer(model).start()
    api = LocalBotApi().start() if chats else None
    try:
        home = GeodeHome(base / "gh").ensure()
        home.config_file.write_text(
            f'[providers]\nmodel = "claude-sonnet-5"\n[providers.anthropic]\nbase_url = "{server.base_url}"\n'
            f'[tools]\nroots = ["{base}"]\n[loop]\nworkers = {workers}\n'
            # the checker reads every receipt: the shipped receipt_keep (2000) prunes resolved receipts
            # beyond it, and a 600 s run at the tree's speed writes ~6,500, which read as "effect without
            # receipt" for the pruned sessions
            "[store]\nreceipt_keep = 1000000\n"
            + (chat_config(api, chat_ids(chats)) if api is not None else "")
            + (job_config(base, chat_ids(chats)[0]) if job and api is not None else "")
            + (f"[supervisor]\n{supervisor}" if supervisor else "")
        )
        token = f"TELEGRAM_BOT_TOKEN={api.token}\n" if api is not None else ""
        home.env_file.write_text("ANTHROPIC_API_KEY=sk-test-key\n" + token)
        try:
            serve(home, cwd=ws)
            yield World(home, server, ws, markers, api, chat_ids(chats) if api is not None else [], model)
        finally:
            stop(home)
    finally:
        server.stop()
        if api is not None:
            api.stop()
