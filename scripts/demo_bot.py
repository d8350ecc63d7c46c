"""The bot part of scripts/demo (no token, no network): a Telegram bot on the running tree, against the local
Bot API server (geode/testing/bot_api_server.py) with the real python-telegram-bot client in the tree's
messengers child and the scripted provider as the model.

Steps, each printed: a message in the bound chat gets one reply; the messengers child is SIGKILLed while a
turn runs (after the turn, before its post) and the restarted child posts the reply exactly once; the child is
killed again right after a post, before the executor recorded it: still one reply, and the reply's receipt is
`uncertain` (`geode receipts --uncertain`) until the operator reconciles it; the chat goes on.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

VENV_BIN = Path(sys.executable).parent
CHAT, ALICE = -1002003004, 4242
T = TypeVar("T")
# armed when the tree starts: the messengers child dies right after its second post (of one incarnation)
FAULTS = "messengers@messengers.after_post:kill:2"


def say(msg: str) -> None:
    print(f"\n== {msg}", flush=True)


def geode(*args: str, env: dict[str, str], quiet: bool = False) -> subprocess.CompletedProcess[str]:
    if not quiet:
        print(f"$ geode {' '.join(args)}", flush=True)
    r = subprocess.run([str(VENV_BIN / "geode"), *args], env=env, text=True, capture_output=True, timeout=120)
    out = (r.stdout + r.stderr).rstrip()
    if out and not quiet:
        print(out, flush=True)
    return r


def wait(pred: Callable[[], T], timeout_s: float, what: str) -> T:
    end = time.monotonic() + timeout_s
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > end:
            raise SystemExit(f"demo failed: timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(0.05)


def scripted() -> Callable[[Any], Any]:
    """The model: answers the chat's last message; a question with "slowly" takes 3 s."""

    def reply(req: Any) -> Any:
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        content = msgs[-1].get("content") if msgs else ""
        text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [])
        if "slowly" in text:
            return {"text": "Durability means the reply survives a crash — posted once.", "delay_s": 3.0}
        return {"text": f"Hello Alice, you said: {text}"}

    return reply


def main() -> int:
    from actors.cli.messengers_view import messengers_detail
    from actors.tree.client import tree_status
    from geode.home import GeodeHome
    from geode.messengers.sessions import reply_operation_id, turn_id_for
    from geode.testing.bot_api_server import LocalBotApi
    from geode.testing.scripted import ScriptedServer

    base = Path(tempfile.mkdtemp(prefix="geode-bot-demo-"))
    api = LocalBotApi().start()
    model = ScriptedServer(scripted()).start()
    home = GeodeHome(base / "home").ensure()
    home.config_file.write_text(
        f'[loop]\nworkers = 1\n[providers]\nmodel = "claude-sonnet-5"\n'
        f'[providers.anthropic]\nbase_url = "{model.base_url}"\n'
        f'[messengers.telegram]\nbase_url = "{api.base_url}"\npoll_timeout_s = 1\n'
        f'[[messengers.bindings]]\nplatform = "telegram"\nchannel_id = "{CHAT}"\n'
        f'allowed_senders = ["{ALICE}"]\n'
    )
    home.env_file.write_text(f"ANTHROPIC_API_KEY=sk-demo-key\nTELEGRAM_BOT_TOKEN={api.token}\n")
    env = {**os.environ, "GEODE_HOME": str(home.root)}
    os.environ["GEODE_HOME"] = str(home.root)

    def replies_to(mid: int) -> list[str]:
        return [p["text"] for p in api.posts(CHAT) if p["reply_to"] == mid]

    def messenger() -> Any:
        st = tree_status(home)
        return next((c for c in (st.children if st else []) if c.name == "messengers"), None)

    def settled(update_id: int) -> bool:
        detail = messengers_detail(home)
        tg = next((p for p in (detail or {}).get("platforms", []) if p["platform"] == "telegram"), None)
        return tg is not None and (tg["cursor"] or 0) > update_id and tg["pending_replies"] == 0

    def send(text: str) -> dict[str, Any]:
        upd = api.push_message(CHAT, text, sender_id=ALICE, username="alice")
        print(f"   alice → chat: {text!r}", flush=True)
        return upd

    def show_replies(upd: dict[str, Any]) -> list[str]:
        got = replies_to(upd["message"]["message_id"])
        for t in got:
            print(f"   bot   → chat: {t!r}", flush=True)
        return got

    print(f"GEODE_HOME={home.root}\nlocal Telegram Bot API server at {api.base_url}<token>/…, chat {CHAT}")
    ok = True
    try:
        say("start the tree: its messengers child polls the local Bot API server (getUpdates) for the bot")
        print(f"   (GEODE_FAULTS={FAULTS}: the messengers child will die right after one of its posts)")
        if geode("serve", env={**env, "GEODE_FAULTS": FAULTS}).returncode != 0:
            return 1
        wait(lambda: api.calls("getUpdates"), 30, "the bot's first poll")

        say("a message in the bound chat gets one reply")
        first = send("hello bot")
        wait(lambda: replies_to(first["message"]["message_id"]), 60, "the reply")
        ok &= len(show_replies(first)) == 1

        say("a slow question; while the bot is typing, SIGKILL the messengers child (turn recorded, no post)")
        typing_before = len(api.actions(CHAT))
        slow = send("explain slowly what durable means")
        wait(lambda: len(api.actions(CHAT)) > typing_before, 30, "the typing action (the turn runs)")
        victim = messenger()
        print(f"   the bot shows 'typing…'; kill -9 {victim.pid} (messengers#{victim.incarnation})")
        os.kill(int(victim.pid), signal.SIGKILL)
        back = wait(
            lambda: (m := messenger()) and m.state == "running" and m.incarnation > victim.incarnation and m,
            30,
            "the messengers child back",
        )
        print(f"   the supervisor restarted it: messengers#{back.incarnation} (pid {back.pid})")
        print("   it reads its journal of owed replies from the store and delivers the finished turn's reply")
        wait(lambda: settled(slow["update_id"]), 60, "the reply settled")
        got = show_replies(slow)
        print(f"   → {len(got)} reply to this message (posted once, through the executor's reply receipt)")
        ok &= len(got) == 1

        say("another message; this time the child dies right AFTER posting, before the executor records it")
        third = send("and after a crash?")
        fired = home.root / "faults" / "messengers.after_post.fired"
        wait(fired.exists, 60, "the fault after the post")
        print(f"   fault fired: {fired.read_text().strip()}")
        wait(lambda: settled(third["update_id"]), 60, "the reply settled")
        got = show_replies(third)
        print(f"   → {len(got)} reply in the chat: the restarted child did not post it again")
        ok &= len(got) == 1
        print("   the executor cannot know whether the post happened, so the reply's receipt is uncertain:")
        geode("receipts", "--uncertain", env=env)
        op = reply_operation_id(turn_id_for("telegram", str(CHAT), str(third["message"]["message_id"])))
        rows = json.loads(geode("receipts", "--uncertain", "--json", env=env, quiet=True).stdout or "[]")
        ok &= op in [r["operation_id"] for r in rows]
        print("   the operator looks at the chat, sees the reply there, and says so:")
        rec = geode("reconcile", op, "--outcome", "applied", "--note", "seen in the chat", env=env)
        ok &= rec.returncode == 0

        say("the chat goes on")
        last = send("still there?")
        wait(lambda: replies_to(last["message"]["message_id"]), 60, "the reply")
        ok &= len(show_replies(last)) == 1

        say("the whole chat, as the Telegram server saw it (every sendMessage it accepted)")
        for p in api.posts(CHAT):
            print(f"   bot: {p['text']!r} (reply to message {p['reply_to']})")
        ok &= len(api.posts(CHAT)) == 4
        say("status (the poller's line), then stop")
        geode("status", env=env)
        print("\nbot demo ok: one reply per message across both kills" if ok else "\nbot demo FAILED")
        return 0 if ok else 1
    finally:
        geode("stop", env=env)
        model.stop()
        api.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
