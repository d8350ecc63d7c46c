"""Kill cells of a webhook delivery on one real `geode serve` tree (issue 30): a GitHub-signed route whose
turn runs one run_bash effect (appending ``<mark> <call id>`` to a file outside the records; ``allowed_tools
= ["run_bash"]``) and posts its answer to a bound Telegram chat, while GEODE_FAULTS SIGKILLs, once each and
on its own delivery:

1. the webhooks child with the intake recorded and the HTTP reply not sent (``webhooks.after_intake``): the
   sender's connection is cut, it retries until a 2xx (a 200 naming the recorded turn);
2. lanes with the delivery's turn stored and not pushed (``lanes.after_turn_stored``, its 2nd turn): the
   turn is re-queued; the sender's redelivery is a 200 naming the same turn;
3. the executor mid-effect (``executor.in_handler``, its 3rd tool call: the command ran, its receipt is not
   committed): the run_bash receipt is ``uncertain`` and the effect is never run again, not by the turn and
   not by the sender's redelivery;
4. the webhooks child with lanes' ack of the turn and the intake not marked submitted
   (``webhooks.after_submit``): the next incarnation submits it again, lanes runs it once;
5. the webhooks child with the turn's end read and not recorded (``webhooks.after_turn_end``): the next
   incarnation reads it again and posts once;
6. the webhooks child with the reply posted and the intake not done (``webhooks.after_reply_posted``): the
   next incarnation asks the executor again under the same operation id (replayed): posted once.

After each: one turn record for the delivery, at most one effect line (exactly one where the effect ran),
at most one post in the chat (exactly one where the turn answered), the intake ``done``; a delivery without
a fault between the cells (a filler) too. A point fires at its ``nth`` hit in one incarnation of its child,
so the cells count on each other's deliveries: the webhooks child's 2nd incarnation (after cell 1) reaches
``after_submit`` for deliveries 1-4, its 3rd ``after_turn_end`` for 4-7, its 4th ``after_reply_posted`` for
7-10 (nth = 4 each: never reached by an earlier incarnation). They run in file order on one tree, all in
CI (~14 s with the tree)."""

from __future__ import annotations

import re
import shlex
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from actors.tree.client import client_bus
from geode.home import GeodeHome
from geode.records.models import Receipt
from geode.records.store_client import StoreClient
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import children, scripted_home, serve, stop, wait_children, wait_for
from tests.messengers.chat_tree_kit import prompt_of
from tests.webhooks.hook_kit import (
    Reply,
    free_port,
    github_headers,
    intake_row,
    pr_body,
    send,
    send_until_2xx,
    turns_with,
)

CHAT = -100831
SECRET = b"gh-kill-cells-secret-1d9a"
PROMPT = "webhook-kill-cell-effect"
MARK = re.compile(r"\b(WH[0-9a-f]{8})\b")
CELLS = (  # in file order: (child, point, nth hit in the child's first incarnation)
    ("webhooks", "webhooks.after_intake", 1),
    ("lanes", "lanes.after_turn_stored", 2),
    ("executor", "executor.in_handler", 3),
    ("webhooks", "webhooks.after_submit", 4),  # 4th delivery (2nd incarnation: 1 re-submitted, 2, 3, 4)
    ("webhooks", "webhooks.after_turn_end", 4),  # 7th (3rd incarnation: 4 re-submitted, 5, 6, 7)
    ("webhooks", "webhooks.after_reply_posted", 4),  # 10th (4th incarnation: 7 looked at again, 8, 9, 10)
)
FAULTS = ",".join(f"{child}@{point}:kill:{nth}" for child, point, nth in CELLS)


class EffectModel:
    """A turn of the route → one run_bash call appending ``<mark> <call id>`` to ``effects`` (an O_APPEND
    write of one short line: one execution, one line) → after its result, ``applied <mark>`` (or
    ``not-applied <mark>`` when the call failed)."""

    def __init__(self, effects: Path) -> None:
        self.effects = effects
        self._ids = count(1)
        self._lock = threading.Lock()

    def __call__(self, req: Any) -> Any:
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        said = prompt_of(req)
        m = MARK.search(said)
        tag = m.group(1) if m else "untagged"
        last = msgs[-1].get("content") if msgs else None
        results = [b for b in last if b.get("type") == "tool_result"] if isinstance(last, list) else []
        if results:
            return {"text": f"{'not-applied' if results[-1].get('is_error') else 'applied'} {tag}"}
        if PROMPT not in said:
            return {"text": f"echo {tag}"}
        with self._lock:
            call_id = f"toolu_hook_{tag}_{next(self._ids)}"
        line = shlex.quote(f"{tag} {call_id}")
        cmd = f"printf '%s\\n' {line} >> {shlex.quote(str(self.effects))}"
        return {"tool_calls": [{"id": call_id, "name": "run_bash", "input": {"command": cmd}}]}

    def lines(self, tag: str) -> list[str]:
        if not self.effects.exists():
            return []
        return [ln for ln in self.effects.read_text().splitlines() if ln.split()[:1] == [tag]]


@dataclass
class Cells:
    home: GeodeHome
    api: LocalBotApi
    model: EffectModel
    url: str
    seen: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cells]:
    base = tmp_path_factory.mktemp("hook_cells")
    model, port = EffectModel(base / "effects.log"), free_port()
    with LocalBotApi() as api, ScriptedServer(model) as server:
        extra = (
            f'[messengers.telegram]\nbase_url = "{api.base_url}"\npoll_timeout_s = 1\n'
            f'[[messengers.bindings]]\nplatform = "telegram"\nchannel_id = "{CHAT}"\n'
            f'[tools]\nroots = ["{base}"]\n'
            f'[webhooks]\nlisten = "127.0.0.1:{port}"\n'
            '[[webhooks.routes]]\nname = "effect"\npath = "/hooks/effect"\nauth = "github"\n'
            f'secrets = ["HOOK_SECRET"]\nprompt = "{PROMPT}"\nfields = ["pull_request.title"]\n'
            f'allowed_tools = ["run_bash"]\ndeliver = "telegram:{CHAT}"\nrate_per_minute = 0\n'
        )
        home = scripted_home(base, server, extra=extra)
        with home.env_file.open("a") as f:
            f.write(f"TELEGRAM_BOT_TOKEN={api.token}\nHOOK_SECRET={SECRET.decode()}\n")
        try:
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("GEODE_FAULTS", FAULTS)
                serve(home)
            yield Cells(home, api, model, f"http://127.0.0.1:{port}/hooks/effect")
        finally:
            stop(home)


_marks = count(1)


def _tag() -> str:
    return f"WH{next(_marks) + 0xC0DE00:08x}"


def _deliver(c: Cells, cell: int) -> tuple[str, bytes, dict[str, str], list[Reply | str]]:
    """One delivery of cell ``cell`` (the earlier cells' faults fired, this one's not yet), sent until a
    2xx; waits until its fault fired and the killed child runs again."""
    child, point, _ = CELLS[cell]
    fired = c.home.root / "faults"
    for _, earlier, _ in CELLS[:cell]:
        assert (fired / f"{earlier}.fired").exists(), f"run the cells in file order: {earlier} never fired"
    assert not (fired / f"{point}.fired").exists(), f"{point} fired before its delivery"
    before = children(c.home)[child].incarnation
    tag = _tag()
    body = pr_body(tag)
    headers = github_headers(SECRET, body, f"delivery-{tag}")
    tries = send_until_2xx(c.url, body, headers)
    wait_for(lambda: (fired / f"{point}.fired").exists() or None, 30.0, what=f"the fault {point}")
    wait_children(c.home, lambda k: k[child].incarnation > before and k[child].state == "running", 30.0)
    return tag, body, headers, tries


def _settled(c: Cells, tag: str, turn_id: str) -> Any:
    """The delivery's intake once done (its answer delivered or not), and its one turn record."""
    row = wait_for(
        lambda: r if (r := intake_row(c.home, "effect", f"delivery-{tag}")) and r.state == "done" else None,
        60.0,
        what=f"the intake of {tag} done",
        swallow=(Exception,),
    )
    turns = turns_with(c.home, tag)
    assert [t.turn_id for t in turns] == [turn_id] == [row.turn_id], (turns, row)  # one turn
    assert turns[0].origin == "webhooks" and turns[0].state.value == "done", turns[0]
    return row


def _posts(c: Cells, tag: str) -> list[str]:
    return [p["text"] for p in c.api.posts(CHAT) if tag in p["text"]]


def _receipts(home: GeodeHome, turn_id: str) -> list[Receipt]:
    with client_bus(home) as bus:
        store = StoreClient(bus.transport)
        turn = store.get_turn(turn_id)
        assert turn is not None
        return [
            r
            for r in store.list_receipts(session_id=turn.session_id, limit=500)
            if r.identity.turn_id == turn_id
        ]


def _one_turn_one_effect_one_post(c: Cells, tag: str, turn_id: str) -> None:
    row = _settled(c, tag, turn_id)
    assert len(c.model.lines(tag)) == 1, c.model.lines(tag)  # the effect ran once
    assert row.delivery == "posted", row
    wait_for(lambda: _posts(c, tag) or None, 15.0, what=f"the answer of {tag} in the chat")
    assert _posts(c, tag) == [f"applied {tag}"]  # posted once
    assert [r.state.value for r in _receipts(c.home, turn_id) if r.identity.tool_name == "run_bash"] == [
        "committed"
    ]


def test_webhooks_killed_after_the_intake_before_the_reply_the_senders_retry_gets_the_one_turn(
    cells: Cells,
) -> None:
    tag, body, headers, tries = _deliver(cells, 0)
    assert isinstance(tries[0], str), tries  # the first attempt's reply never came: the child died
    last = tries[-1]
    assert isinstance(last, Reply) and last.status == 200, last  # the retry: the intake was recorded before
    _one_turn_one_effect_one_post(cells, tag, last.json["turn_id"])
    again = send(cells.url, body, headers)
    assert again.status == 200 and again.json["turn_id"] == last.json["turn_id"], again
    assert len(cells.model.lines(tag)) == 1 and len(_posts(cells, tag)) == 1


def test_lanes_killed_with_the_turn_stored_runs_it_once_and_a_redelivery_starts_nothing(cells: Cells) -> None:
    tag, body, headers, tries = _deliver(cells, 1)
    first = tries[-1]
    assert isinstance(first, Reply) and first.status == 202, tries
    again = send(cells.url, body, headers)  # the sender's redelivery while lanes restarts
    assert again.status == 200 and again.json["turn_id"] == first.json["turn_id"], again
    _one_turn_one_effect_one_post(cells, tag, first.json["turn_id"])


def test_the_executor_killed_mid_effect_leaves_it_uncertain_and_never_runs_it_again(cells: Cells) -> None:
    tag, body, headers, tries = _deliver(cells, 2)
    first = tries[-1]
    assert isinstance(first, Reply) and first.status == 202, tries
    turn_id = first.json["turn_id"]
    row = _settled(cells, tag, turn_id)
    got = [(r.identity.tool_name, r.state.value) for r in _receipts(cells.home, turn_id)]
    assert ("run_bash", "uncertain") in got, got  # cut mid-way: uncertain, for the operator
    again = send(cells.url, body, headers)  # the sender's redelivery: the same turn, nothing runs again
    assert again.status == 200 and again.json["turn_id"] == turn_id, again
    wait_for(lambda: intake_row(cells.home, "effect", f"delivery-{tag}").state == "done" or None, 10.0)
    assert len(cells.model.lines(tag)) == 1, cells.model.lines(tag)  # ran once (the kill came after it)
    assert [r.state.value for r in _receipts(cells.home, turn_id) if r.identity.tool_name == "run_bash"] == [
        "uncertain"
    ]  # one receipt: the call was not admitted again
    posts = _posts(cells, tag)
    assert len(posts) <= 1 and f"applied {tag}" not in posts, (posts, row)  # never told "applied"
    if not row.answer_chars:  # no answer: the chat is told once how the turn ended, never "applied"
        ended = f"ended without an answer ({row.termination_reason})"
        assert row.delivery == "posted" and [p["text"] for p in cells.api.posts(CHAT) if ended in p["text"]]
    assert row.delivery in ("posted", "none", "refused", "uncertain"), row
    cells.seen["executor"] = (row.termination_reason, row.delivery, posts)
    print(f"\nexecutor killed mid-effect: {cells.seen['executor']}")


def _filler(c: Cells) -> None:
    """A delivery between the cells, no fault due: one turn, one effect, one post."""
    tag = _tag()
    body = pr_body(tag)
    r = send(c.url, body, github_headers(SECRET, body, f"delivery-{tag}"))
    assert r.status == 202, r.text
    _one_turn_one_effect_one_post(c, tag, r.json["turn_id"])


def _cell_posts_once(c: Cells, cell: int) -> None:
    tag, body, headers, tries = _deliver(c, cell)
    first = tries[-1]
    assert isinstance(first, Reply) and first.status == 202, tries  # the kill came after the reply
    _one_turn_one_effect_one_post(c, tag, first.json["turn_id"])
    again = send(c.url, body, headers)  # a redelivery once the child is back: nothing starts
    assert again.status == 200 and again.json["turn_id"] == first.json["turn_id"], again
    assert len(c.model.lines(tag)) == 1 and _posts(c, tag) == [f"applied {tag}"]


def test_webhooks_killed_after_lanes_acked_the_turn_submits_it_again_and_it_runs_once(cells: Cells) -> None:
    _cell_posts_once(cells, 3)


def test_webhooks_killed_with_the_turn_ended_reads_it_again_and_posts_once(cells: Cells) -> None:
    _filler(cells)
    _filler(cells)
    _cell_posts_once(cells, 4)


def test_webhooks_killed_with_the_reply_posted_asks_again_and_posts_once(cells: Cells) -> None:
    _filler(cells)
    _filler(cells)
    _cell_posts_once(cells, 5)
