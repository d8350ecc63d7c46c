"""Issue 33 item 1 against a real `geode serve` tree and a local OTLP/HTTP receiver: one turn with a tool
call is one trace whose spans cover control, lanes, the loop worker, each model call, the executor, the tool
and the store, parented as the turn crossed them; a turn whose loop worker is SIGKILLed mid-turn resumes in
the same trace; with telemetry off no child loads OpenTelemetry and no envelope carries ``trace``."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.cli.client import ControlClient
from actors.tree.client import client_bus
from geode.home import GeodeHome
from geode.protocol import lanes as lanes_msg
from geode.protocol.errors import GeodeError
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.otlp_receiver import OtlpReceiver, SpanRow
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_home, scripted_tree, serve, status_children, stop
from tests.waiting import poll_for
from tests.webhooks.hook_kit import Reply, free_port, github_headers, pr_body, send_until_2xx

CHILDREN = ("store", "lanes", "executor", "loop-1", "loop-2", "control", "scheduler")
SECRET = b"trace-hook-secret"
TREE: dict[str, Any] = {"port": free_port()}
# the other entry paths: a scheduled job (run by `geode schedule run-now`), a webhook route, a Telegram chat
ENTRIES = """
[[schedule.jobs]]
name = "tick"
every = "1d"
prompt = "a scheduled tick"
[webhooks]
listen = "127.0.0.1:{port}"
[[webhooks.routes]]
name = "gh"
path = "/hooks/gh"
auth = "github"
secrets = ["GH_SECRET"]
prompt = "A GitHub event arrived."
fields = ["action"]
[messengers.telegram]
base_url = "{api}"
poll_timeout_s = 1
[[messengers.bindings]]
platform = "telegram"
channel_id = "{chat}"
"""
CHAT = -100333


def _text(content: Any) -> str:
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [])


def _reply(ws: Path, gate: threading.Event):  # type: ignore[no-untyped-def]
    """First call: write a file named after the prompt's last word; after the tool result: a final text.
    A prompt with "hold" waits for ``gate`` in its first call (the test kills its worker meanwhile)."""

    def reply(req: Any) -> Any:
        last = req.body["messages"][-1]
        content = last.get("content")
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            return {"text": "wrote it"}
        text = _text(content)
        if "scheduled tick" in text or "GitHub event" in text or "hello traced" in text:
            return {"text": "noted"}
        if "hold" in text:
            gate.wait(60)
        name = text.split()[-1]
        return {
            "tool_calls": [
                {"name": "write_file", "input": {"file_path": str(ws / f"{name}.txt"), "content": name}}
            ]
        }

    return reply


Tree = tuple[GeodeHome, Path, OtlpReceiver, threading.Event]


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    base = tmp_path_factory.mktemp("traced")
    ws = base / "ws"
    ws.mkdir()
    gate = threading.Event()
    with OtlpReceiver() as rx:
        extra = f'[telemetry]\notlp_endpoint = "{rx.endpoint}"\nschedule_delay_s = 0.05\n'
        api = LocalBotApi().start()
        TREE["api"] = api
        extra += ENTRIES.format(port=TREE["port"], api=api.base_url, chat=CHAT)
        model = ScriptedServer(_reply(ws, gate)).start()
        try:
            home = scripted_home(base, model, ws, extra)
            with home.env_file.open("a") as f:
                f.write(f"GH_SECRET={SECRET.decode()}\nTELEGRAM_BOT_TOKEN={api.token}\n")
            serve(home, cwd=ws)
            yield home, ws, rx, gate
        finally:
            gate.set()
            stop(home)
            model.stop()
            api.stop()


def _prompt(home: GeodeHome, ws: Path, text: str) -> dict[str, Any]:
    cl = ControlClient(home)
    cl.connect(cwd=str(ws), is_tty=True)
    try:
        return cl.run_prompt(text, on_approval=lambda d: "y", timeout_s=90)
    finally:
        cl.close()


def _lanes_turn(home: GeodeHome, turn_id: str) -> dict[str, Any]:
    with client_bus(home) as bus:
        return bus.transport.call("lanes", lanes_msg.TURN, {"turn_id": turn_id}, timeout_s=3.0)


def _one(rows: list[SpanRow], name: str) -> SpanRow:
    found = [r for r in rows if r.name == name]
    assert len(found) == 1, (name, [(r.name, r.instance) for r in rows])
    return found[0]


def _ancestors(rows: list[SpanRow], row: SpanRow) -> list[str]:
    by_id = {r.span_id: r for r in rows}
    names, cur = [], row
    while cur.parent_id:
        cur = by_id[cur.parent_id]  # a missing parent fails the test: every span's parent was exported
        names.append(cur.name)
    return names


def _rooted_turn(rows: list[SpanRow], root_name: str) -> list[SpanRow] | None:
    """The spans of the trace whose root is ``root_name``, once its lanes and loop spans arrived."""
    roots = [r for r in rows if r.name == root_name and r.parent_id == ""]
    for root in roots:
        trace = [r for r in rows if r.trace_id == root.trace_id]
        names = {r.name for r in trace}  # each process exports on its own: wait for all of them
        if {"lanes.admit", "lanes.dispatch", "turn.run", "loop.turn"} <= names and any(
            n.startswith("chat ") for n in names
        ):
            return trace
    return None


def test_a_chat_message_a_scheduled_occurrence_and_a_webhook_intake_start_their_turns_traces(
    traced: Tree,
) -> None:
    home, _, rx, _ = traced
    ran = geode(home, "schedule", "run-now", "tick")
    assert ran.returncode == 0, ran.stderr
    body = pr_body("traced")
    tries = send_until_2xx(
        f"http://127.0.0.1:{TREE['port']}/hooks/gh", body, github_headers(SECRET, body, "d-traced-1")
    )
    assert isinstance(tries[-1], Reply) and tries[-1].status == 202, tries
    TREE["api"].push_message(CHAT, "hello traced")
    for root_name, where, attr in (
        ("messengers.message", "messengers#", ("geode.platform", "telegram")),
        ("schedule.occurrence", "scheduler#", ("geode.job", "tick")),
        ("webhooks.intake", "webhooks#", ("geode.route", "gh")),
    ):
        rx.wait_for(lambda rows, n=root_name: _rooted_turn(rows, n) is not None, 30)
        rows = _rooted_turn(rx.spans(), root_name)
        assert rows is not None
        root = _one(rows, root_name)
        assert root.instance.startswith(where) and root.attributes[attr[0]] == attr[1]
        admit = _one(rows, "lanes.admit")
        assert admit.parent_id == root.span_id and admit.attributes["geode.mode"] in ("AUTOMATION", "DAEMON")
        turn = _one(rows, "loop.turn")
        assert _ancestors(rows, turn)[:4] == ["turn.run", "lanes.dispatch", "lanes.admit", root_name]
        assert any(r.name.startswith("chat ") and r.parent_id == turn.span_id for r in rows)
    chat = rx.wait_for(lambda rows: _reply_posted(rows) is not None)
    reply, deliver = _reply_posted(chat) or (None, None)
    assert reply is not None and deliver is not None and reply.instance.startswith("messengers#")
    assert deliver.instance.startswith("executor#") and [t for t in TREE["api"].posts(CHAT) if t]


def _reply_posted(rows: list[SpanRow]) -> tuple[SpanRow, SpanRow] | None:
    """The chat turn's reply post: ``messengers.reply`` under its ``lanes.admit``, the executor's
    ``messenger.deliver`` under it."""
    by_id = {r.span_id: r for r in rows}
    for reply in (r for r in rows if r.name == "messengers.reply"):
        parent = by_id.get(reply.parent_id)
        deliver = next(
            (r for r in rows if r.parent_id == reply.span_id and r.name == "messenger.deliver"), None
        )
        if parent is not None and parent.name == "lanes.admit" and deliver is not None:
            return reply, deliver
    return None


def test_one_turn_with_a_tool_call_is_one_trace_across_the_tree(traced: Tree) -> None:
    home, ws, rx, _ = traced
    result = _prompt(home, ws, "please write alpha")
    assert result["termination_reason"] == "natural", result
    trace = _lanes_turn(home, result["turn_id"])["trace"]
    trace_id = trace[3:35]

    def complete(rows: list[SpanRow]) -> bool:  # every process exports on its own thread: wait for all
        mine = [r for r in rows if r.trace_id == trace_id]
        names = {r.name for r in mine}
        stores = {r.parent_id for r in mine if r.name.startswith("store.")}
        return (
            {"control.prompt", "lanes.admit", "lanes.dispatch", "turn.run", "loop.turn", "tool.execute"}
            <= names
            and {"execute_tool write_file", "turn.done", "store.checkpoint.save"} <= names
            and sum(r.name.startswith("chat ") for r in mine) == 2
            and any(r.span_id in stores for r in mine if r.name == "execute_tool write_file")
        )

    rows = [r for r in rx.wait_for(complete) if r.trace_id == trace_id]
    prompt = _one(rows, "control.prompt")
    assert prompt.parent_id == "" and prompt.instance.startswith("control#")
    admit = _one(rows, "lanes.admit")
    assert admit.parent_id == prompt.span_id and admit.instance.startswith("lanes#")
    assert trace.startswith(f"00-{trace_id}-{admit.span_id}-")  # the record keeps the admission's context
    push = _one(rows, "lanes.dispatch")
    assert push.parent_id == admit.span_id and push.attributes["geode.attempt"] == 1
    turn = _one(rows, "loop.turn")
    assert turn.instance.startswith("loop-") and _ancestors(rows, turn)[:3] == [
        "turn.run",
        "lanes.dispatch",
        "lanes.admit",
    ]
    calls = [r for r in rows if r.name.startswith("chat ")]
    assert len(calls) == 2 and all(r.parent_id == turn.span_id for r in calls)
    assert calls[0].attributes["gen_ai.request.model"] == "claude-sonnet-5"
    assert {tuple(r.attributes["gen_ai.response.finish_reasons"]) for r in calls} == {
        ("tool_use",),
        ("end_turn",),
    }
    assert all(r.attributes["gen_ai.usage.output_tokens"] >= 0 for r in calls)
    assert all("gen_ai.input.messages" not in r.attributes for r in calls)  # include_content is off
    execute = _one(rows, "tool.execute")
    assert execute.parent_id == turn.span_id and execute.instance.startswith("executor#")
    tool = _one(rows, "execute_tool write_file")
    assert tool.parent_id == execute.span_id and "gen_ai.tool.call.arguments" not in tool.attributes
    store = [r for r in rows if r.name.startswith("store.") and r.instance.startswith("store#")]
    assert any(r.name == "store.checkpoint.save" and r.parent_id == turn.span_id for r in store), store
    assert any("execute_tool write_file" in _ancestors(rows, r) for r in store), store  # its receipt
    done = _one(rows, "turn.done")
    assert done.parent_id == turn.span_id and done.instance.startswith("lanes#")
    log = (home.logs_dir / f"{turn.instance.split('#')[0]}.log").read_text()
    accepted = next(ln for ln in log.splitlines() if f"turn {result['turn_id']} accepted" in ln)
    assert f" trace={trace_id}:" in accepted  # a line logged under a span says its trace id


def test_a_turn_whose_loop_worker_was_killed_resumes_in_the_same_trace(traced: Tree) -> None:
    home, ws, rx, gate = traced
    gate.clear()
    out: dict[str, Any] = {}
    runner = threading.Thread(
        target=lambda: out.update(_prompt(home, ws, "hold then write beta")), daemon=True
    )
    runner.start()
    try:
        row = poll_for(lambda: _running(home), 30, what="the held turn running", swallow=(GeodeError,))
        os.kill(int(status_children(home)[row["worker"]]["pid"]), signal.SIGKILL)
        poll_for(
            lambda: (r := _lanes_turn(home, row["turn_id"])) and r.get("attempts") == 2, 30, what="the resume"
        )
    finally:
        gate.set()
    runner.join(90)
    assert out.get("termination_reason") == "natural", out
    trace_id = _lanes_turn(home, row["turn_id"])["trace"][3:35]

    def resumed(rows: list[SpanRow]) -> bool:
        mine = [r for r in rows if r.trace_id == trace_id]
        pushes = sum(r.name == "lanes.dispatch" for r in mine)
        return pushes == 2 and {"loop.turn", "execute_tool write_file"} <= {r.name for r in mine}

    rows = rx.wait_for(resumed)
    rows = [r for r in rows if r.trace_id == trace_id]
    pushes = sorted(r.attributes["geode.attempt"] for r in rows if r.name == "lanes.dispatch")
    assert pushes == [1, 2]
    resumed = [r for r in rows if r.name == "loop.turn"]
    assert [(r.attributes["geode.attempt"], r.attributes["geode.resume"]) for r in resumed] == [(2, True)]
    assert _one(rows, "execute_tool write_file").trace_id == trace_id  # the resumed part's tool call


def _running(home: GeodeHome) -> dict[str, Any] | None:
    with client_bus(home) as bus:
        rows = bus.transport.call("lanes", lanes_msg.LANES_STATUS, {}, timeout_s=3.0).get("turns") or []
    return next((t for t in rows if t["state"] == "running" and t.get("attempts") == 1), None)


def test_with_telemetry_off_no_child_loads_opentelemetry_and_no_envelope_carries_trace(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    gate = threading.Event()
    gate.set()
    with scripted_tree(tmp_path, _reply(ws, gate), ws, cwd=ws) as (home, _server):
        result = _prompt(home, ws, "please write gamma")
        assert result["termination_reason"] == "natural", result
        assert (ws / "gamma.txt").read_text() == "gamma"
        assert (
            "trace" not in _lanes_turn(home, result["turn_id"])
            or _lanes_turn(home, result["turn_id"])["trace"] is None
        )
        stop(home)  # each child's stop line says what its tracing did
        for name in CHILDREN:
            line = poll_for(lambda name=name: _stop_line(home, name), 10, what=f"{name}'s stop line")
            assert (
                "telemetry: off; opentelemetry SDK modules loaded 0; traced envelopes received 0;" in line
            ), line


def _stop_line(home: GeodeHome, name: str) -> str | None:
    log = (home.logs_dir / f"{name}.log").read_text()
    return next((ln for ln in log.splitlines() if "telemetry: on;" in ln or "telemetry: off;" in ln), None)


def test_the_traced_trees_children_say_at_their_stop_that_they_traced(traced: Tree) -> None:
    """The other side of the off test's check (run last: it stops the module's traced tree)."""
    home = traced[0]
    stop(home)
    for name in (*CHILDREN, "webhooks", "messengers"):
        line = poll_for(lambda name=name: _stop_line(home, name), 10, what=f"{name}'s stop line")
        assert "telemetry: on; opentelemetry SDK modules loaded " in line and "spans dropped 0" in line, line
        loaded = int(line.split("SDK modules loaded ")[1].split(";")[0])
        received = int(line.split("traced envelopes received ")[1].split(";")[0])
        # control only sends traced envelopes; a loop worker's line may be its restarted incarnation's
        assert loaded > 0 and (received > 0 or name not in ("store", "lanes", "executor")), line
