"""The interactive chat's line editing and slash commands in a real terminal (tmux) against a served tree with
the scripted model: Tab completes a command, Up recalls the last prompt (in the same run and in the next one:
the history is kept in ``$GEODE_HOME/chat_history``, 0600), ``/help`` lists the commands, ``/foo`` is said to
be unknown and never reaches the model, ``/compact`` stores a summary that the next request starts from,
``/model`` refuses an unknown id and switches to a known one, ``/memory`` and ``/skills`` show what a session
here is given, ``/clear`` starts a new session and ``/resume ID`` goes back to the first."""

from __future__ import annotations

import json
import shutil
import stat
from collections.abc import Iterator

import pytest

from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import scripted_tree, wait_for
from tests.cli.scripted_chat import make_reply
from tests.cli.test_chat_terminal import Term

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
SUMMARY_TAG = "[system:compaction-summary]"


@pytest.fixture(scope="module")
def term(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Term, ScriptedServer]]:
    base = tmp_path_factory.mktemp("chatcmd")
    ws = base / "ws"
    ws.mkdir()
    with scripted_tree(base, make_reply(ws), ws, cwd=ws) as (home, server):
        t = Term(home, ws)
        try:
            yield t, server
        finally:
            t.kill_server()


def _texts(server: ScriptedServer, start: int = 0) -> str:
    return json.dumps([r.body for r in server.requests[start:]])


def _ready(t: Term, name: str) -> None:
    """Wait for the prompt: the pane's last line is an empty ``>`` (keys sent before it reach the terminal
    in its cooked mode)."""
    last = lambda: [ln for ln in t.screen(name).splitlines() if ln.strip()][-1:] == [">"] or None  # noqa: E731
    wait_for(last, 60, what=f"the prompt of {name}")


def test_history_help_unknown_compact_and_model(term: tuple[Term, ScriptedServer]) -> None:
    t, server = term
    t.start("a")
    t.wait("a", "type a prompt")
    _ready(t, "a")
    t.type("a", "hello one")
    t.wait("a", "echo: hello one")
    _ready(t, "a")
    t.tmux("send-keys", "-t", "a", "Up")  # the last prompt comes back on the line; Enter sends it again
    t.enter("a")
    t.wait("a", "echo: hello one", times=2)

    t.tmux("send-keys", "-t", "a", "-l", "/he")  # Tab completes the command
    t.tmux("send-keys", "-t", "a", "Tab")
    t.wait("a", "> /help")
    t.enter("a")
    screen = t.wait("a", "list these commands")
    for name in ("/compact", "/memory", "/skills", "/status", "/model", "/clear", "/resume"):
        assert name in screen
    before = len(server.requests)
    t.type("a", "/foo bar")
    t.wait("a", "unknown command: /foo (try /help)")

    t.type("a", "/compact")
    t.wait("a", "· Compacted: 4 messages summarized")
    assert "/foo" not in _texts(server, before)  # never sent to the model
    summary_calls = [r for r in server.requests[before:] if "compacting" in json.dumps(r.body.get("system"))]
    assert len(summary_calls) == 1 and "hello one" in json.dumps(summary_calls[0].body["messages"])
    t.type("a", "hello two")
    asked = lambda: [r for r in server.requests if "hello two" in json.dumps(r.body["messages"])]  # noqa: E731
    msgs = wait_for(asked, 60, what="the prompt after /compact")[0].body["messages"]
    # the summary and the new prompt in one message: the four earlier messages are not sent
    assert len(msgs) == 1 and SUMMARY_TAG in json.dumps(msgs) and "hello two" in json.dumps(msgs)

    t.type("a", "/model no-such-model-9")
    t.wait("a", "unknown model 'no-such-model-9'; known: ")
    t.type("a", "/model claude-opus-4-8")
    t.wait("a", "the next turns use claude-opus-4-8 (anthropic)")
    t.type("a", "hello three")
    t.wait("a", "echo: hello three")
    assert server.requests[-1].body["model"] == "claude-opus-4-8"
    t.type("a", "/status")
    screen = t.wait("a", "children running")
    assert "model     claude-opus-4-8 (anthropic)" in screen
    memory = t.home.root / "memory" / "MEMORY.md"  # the operator's: what the chat's sessions are given
    memory.parent.mkdir(parents=True, exist_ok=True)
    memory.write_text("- the operator prefers tabs\n")
    t.type("a", "/memory")
    t.wait("a", "- the operator prefers tabs")
    t.type("a", "/skills")
    t.wait("a", "no skills (in ")
    t.type("a", "/clear")
    screen = t.wait("a", "· new session s-")
    first = screen.split("· session ", 1)[1].split()[0]
    assert screen.split("· new session ", 1)[1].split()[0] != first
    t.type("a", f"/resume {first}")
    t.wait("a", f"· resumed session {first}")
    _ready(t, "a")  # Ctrl-D sent before the prompt reads is taken by the cooked terminal, and lost
    t.tmux("send-keys", "-t", "a", "C-d")  # Ctrl-D: the last prompts in the history are /clear, /resume
    dead = lambda: t.tmux("display-message", "-p", "-t", "a", "#{pane_dead}").strip() == "1" or None  # noqa: E731
    wait_for(dead, 30, what="the chat never ended")

    history = t.home.root / "chat_history"
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    t.start("b")  # the next run: Up recalls the previous run's prompts
    t.wait("b", "type a prompt")
    _ready(t, "b")
    t.tmux("send-keys", "-t", "b", "Up", "Up")
    t.wait("b", "> /clear")
    t.type("b", "exit")
