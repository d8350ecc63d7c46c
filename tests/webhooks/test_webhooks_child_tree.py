"""The webhooks child in a real `geode serve` tree (scripted model): a GitHub-signed delivery over real HTTP
is 202 and its turn runs in AUTOMATION to its end; its status url returns the answer; the same delivery again
is 200 with the same turn id and no second turn; `geode webhooks --json` shows the child's counters and
`geode webhooks replay` re-runs it under ``<id>.replay-1``; the
child SIGKILLed between recording an intake and answering its sender (``webhooks.after_intake``) is
restarted by the supervisor and its next incarnation submits that intake; ``geode reload`` makes the running
child serve a new route with its new ``.env`` secret. The tests share one tree, in file
order.

How to configure a route in a test home (what this file does; ``tests/webhooks/hook_kit.py`` signs and
sends)::

    port = free_port()
    extra = f'''
    [webhooks]
    listen = "127.0.0.1:{port}"          # set: `geode serve` starts the webhooks child (never --repl)
    [[webhooks.routes]]
    name = "gh"
    path = "/hooks/gh"
    auth = "github"
    secrets = ["GH_SECRET"]              # a NAME: the value goes in $GEODE_HOME/.env
    keep_headers = ["X-GitHub-Event"]
    prompt = "A GitHub event arrived. Summarize it."
    fields = ["action", "repository.full_name", "pull_request.title"]
    # deliver = "telegram:<chat>" needs [messengers.telegram] + a [[messengers.bindings]] entry
    '''
    home = scripted_home(base, model, extra=extra)
    with home.env_file.open("a") as f:
        f.write("GH_SECRET=...\\n")
    serve(home)  # set GEODE_FAULTS (e.g. "webhooks@webhooks.after_intake:kill:2") around it to arm a point

then ``send(f"http://127.0.0.1:{port}/hooks/gh", body, github_headers(secret, body, "delivery-1"))`` is 202
``{"turn_id", "status_url"}``; ``status_of(base, reply)`` reads the status url.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from actors.tree.client import client_bus
from geode.home import GeodeHome
from geode.records.store_client import StoreClient
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import children, geode, scripted_home, serve, status_children, stop, wait_for
from tests.messengers.chat_tree_kit import prompt_of
from tests.webhooks.hook_kit import (
    free_port,
    github_headers,
    intake_row,
    pr_body,
    send,
    send_until_2xx,
    status_of,
    turns_with,
)

SECRET = b"child-tree-secret-9d2e"
SECRET2 = b"child-tree-second-secret-41ab"
ROUTE2 = """
[[webhooks.routes]]
name = "gh2"
path = "/hooks/gh2"
auth = "github"
secrets = ["GH2_SECRET"]
prompt = "Another GitHub event."
fields = ["pull_request.title"]
"""
TREE: dict[str, Any] = {}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeodeHome]:
    base = tmp_path_factory.mktemp("webhooks_tree")
    port = free_port()
    extra = f"""
[webhooks]
listen = "127.0.0.1:{port}"
[[webhooks.routes]]
name = "gh"
path = "/hooks/gh"
auth = "github"
secrets = ["GH_SECRET"]
keep_headers = ["X-GitHub-Event"]
prompt = "A GitHub event arrived. Summarize it."
fields = ["action", "repository.full_name", "pull_request.title"]
"""
    with ScriptedServer(lambda req: {"text": f"summary: {prompt_of(req)}"}) as model:
        home = scripted_home(base, model, extra=extra)
        with home.env_file.open("a") as f:
            f.write(f"GH_SECRET={SECRET.decode()}\n")
        TREE["url"], TREE["base"], TREE["model"] = (
            f"http://127.0.0.1:{port}/hooks/gh",
            f"http://127.0.0.1:{port}",
            model,
        )
        try:
            with pytest.MonkeyPatch.context() as mp:  # the child dies after recording its 2nd intake, once
                mp.setenv("GEODE_FAULTS", "webhooks@webhooks.after_intake:kill:2")
                serve(home)
            yield home
        finally:
            stop(home)


def done_status(reply: Any) -> dict[str, Any] | None:
    got = status_of(TREE["base"], reply)
    return got if got["status"] == "done" and got["delivery"] else None


def test_a_signed_delivery_runs_an_automation_turn_and_its_status_url_answers(tree: GeodeHome) -> None:
    home = tree
    kids = status_children(home)  # geode status lists the child
    assert kids["webhooks"]["state"] == "running"
    body = pr_body("FIRSTMARK")
    r = send(TREE["url"], body, github_headers(SECRET, body, "delivery-1"))
    assert r.status == 202, r.text
    turn_id = r.json["turn_id"]
    got = wait_for(lambda: done_status(r), 10.0, what="the delivery's status to say done")
    assert got["turn_id"] == turn_id and got["delivery_id"] == "delivery-1" and got["route"] == "gh"
    assert got["answer"] and "FIRSTMARK" in got["answer"] and got["delivery"] == "none"
    (turn,) = turns_with(home, "FIRSTMARK")
    assert (turn.turn_id, turn.mode, turn.origin, turn.state) == (turn_id, "AUTOMATION", "webhooks", "done")
    assert "UNSELECTED" not in str(turn.input)  # only the route's fields reach the prompt
    with client_bus(home) as bus:
        rows = StoreClient(bus.transport).read_timeline(turn.session_id)
    (intake,) = [x.event for x in rows if x.event.kind == "webhook.intake"]
    assert intake.event_id == f"intake-{turn_id}" and intake.payload["kept"] == {
        "X-GitHub-Event": "pull_request"
    }
    bad = send(f"{TREE['base']}{r.json['status_url'].split('?')[0]}?token={'0' * 32}", b"", {}, method="GET")
    assert bad.status == 404  # the status url needs its token


def test_a_repeated_delivery_is_200_with_the_same_turn_and_replay_reruns_it(tree: GeodeHome) -> None:
    home = tree
    body = pr_body("FIRSTMARK")
    again = send(TREE["url"], body, github_headers(SECRET, body, "delivery-1"))
    assert again.status == 200, again.text
    assert again.json["status"] == "done" and len(turns_with(home, "FIRSTMARK")) == 1
    first = intake_row(home, "gh", "delivery-1")
    assert again.json["turn_id"] == first.turn_id
    listed = geode(home, "webhooks", "--json")  # the operator's view, from the running child
    assert listed.returncode == 0, listed.stderr
    view = json.loads(listed.stdout)
    (gh,) = [r for r in view["routes"] if r["name"] == "gh"]
    assert view["source"] == "child" and gh["counters"]["accepted"] >= 1 and gh["counters"]["replayed"] >= 1
    replayed = geode(home, "webhooks", "replay", "delivery-1", "--json")
    assert replayed.returncode == 0, replayed.stderr
    got = json.loads(replayed.stdout)
    assert got["delivery_id"] == "delivery-1.replay-1" and got["turn_id"] != first.turn_id
    wait_for(lambda: len(turns_with(home, "FIRSTMARK")) == 2, 10.0, what="the replay's turn")
    row = wait_for(
        lambda: x if (x := intake_row(home, "gh", "delivery-1.replay-1")).state == "done" else None,
        10.0,
        what="the replay's intake to be done",
    )
    assert (row.origin, row.replay_of) == ("replay", "delivery-1")


def test_a_killed_child_is_restarted_and_submits_the_intake_it_recorded(tree: GeodeHome) -> None:
    home = tree
    old = children(home)["webhooks"]
    body = pr_body("KILLMARK")
    t0 = time.monotonic()
    tries = send_until_2xx(TREE["url"], body, github_headers(SECRET, body, "delivery-2"), timeout_s=10.0)
    assert (home.root / "faults" / "webhooks.after_intake.fired").exists()
    assert isinstance(tries[0], str)  # the first incarnation died with the sender's reply unsent
    last = tries[-1]
    assert not isinstance(last, str) and last.status == 200, last  # recorded before the kill: a replay
    assert children(home)["webhooks"].incarnation > old.incarnation
    row = intake_row(home, "gh", "delivery-2")
    assert last.json["turn_id"] == row.turn_id
    wait_for(lambda: done_status(last), 10.0, what="the next incarnation to submit and finish the intake")
    (turn,) = turns_with(home, "KILLMARK")
    assert turn.turn_id == row.turn_id and turn.state == "done"
    assert time.monotonic() - t0 < 10.0


def test_reload_serves_a_new_route_with_its_new_secret(tree: GeodeHome) -> None:
    home = tree
    pid = children(home)["webhooks"].pid
    url2 = f"{TREE['base']}/hooks/gh2"
    body = pr_body("RELOADMARK")
    assert send(url2, body, github_headers(SECRET2, body, "delivery-3")).status == 404  # not a route yet
    with home.config_file.open("a") as f:
        f.write(ROUTE2)
    with home.env_file.open("a") as f:
        f.write(f"GH2_SECRET={SECRET2.decode()}\n")
    r = geode(home, "reload", timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "webhooks: [webhooks] routes, GH2_SECRET changed re-applied" in r.stdout
    assert (
        send(url2, body, github_headers(SECRET, body, "delivery-3")).status == 401
    )  # gh's secret: not gh2's
    ok = send(url2, body, github_headers(SECRET2, body, "delivery-3"))
    assert ok.status == 202, ok.text
    wait_for(lambda: done_status(ok), 10.0, what="the new route's turn to end")
    assert children(home)["webhooks"].pid == pid  # applied by the running child, not a restart
