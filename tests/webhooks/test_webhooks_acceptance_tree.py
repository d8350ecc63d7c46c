"""Issue 30's acceptance on a real `geode serve` tree (scripted model, the local Telegram Bot API, a webhooks
listener on a free loopback port), driven by a real HTTP client that signs as GitHub and Stripe do with
``hmac`` in the test (tests/webhooks/hook_kit.py; checked first against GitHub's documented vector):

- a signed delivery sent 5 times at once and once more after its turn ended starts one turn (one turn
  record, one model request) and posts its answer once in the bound chat; every 2xx names the same turn;
- the model's request holds the route's selected fields inside the template's fenced untrusted-data block
  and nothing the route did not select (a canary field of the body is absent), no secret and no signature;
  the body is a file in the workspace only of the route that asks (``body_file = true``);
- bad input (wrong signature, stale timestamp, missing auth, unknown route, body over the limit, invalid
  JSON, a flood over the rate limit, a full queue) is answered 401/401/401/404/413/400/429/503 (the last two
  with Retry-After), records nothing in the intake table, starts no turn, and the child keeps its pid;
- 10,000 malformed requests over keep-alive connections grow the child's RSS by less than 5 MiB after a
  warm-up of 1,000.
The tests share one tree, in file order."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import children, scripted_home, serve, status_children, stop, wait_for
from tests.messengers.chat_tree_kit import prompt_of
from tests.webhooks.hook_kit import (
    GITHUB_VECTOR,
    Flood,
    free_port,
    github_headers,
    github_signature,
    intake_counts,
    intake_total,
    marks_in,
    pr_body,
    raw_request,
    route_counters,
    rss_kib,
    send,
    send_concurrently,
    status_of,
    stripe_signature,
    turns_with,
    wait_posts,
)

CHAT = -100830
GH_SECRET = b"gh-acceptance-secret-5f1c"
STRIPE_SECRET = b"whsec_acceptance_0b7e"
TOKEN = "bearer-acceptance-token-77aa"
INSTRUCTION = "A GitHub event arrived. Summarize it for the team."
HOLD = "HOLD-THIS-TURN"  # the hold route's instruction: the model answers only once the test lets it
MARK = re.compile(r"\b(WH[0-9a-f]{8})\b")
NONCE = re.compile(r"[0-9a-f]{12,}")  # a fence's nonce
_ids = iter(range(1, 1_000_000))


def mark() -> str:
    return f"WH{next(_ids):08x}"


def _routes(port: int) -> str:
    gh = 'auth = "github"\nsecrets = ["GH_HOOK_SECRET"]\n'
    return f"""
[webhooks]
listen = "127.0.0.1:{port}"
[[webhooks.routes]]
name = "gh"
path = "/hooks/github"
{gh}keep_headers = ["X-GitHub-Event"]
prompt = "{INSTRUCTION}"
fields = ["action", "repository.full_name", "pull_request.title", "headers.X-GitHub-Event"]
deliver = "telegram:{CHAT}"
rate_per_minute = 0
max_body_bytes = 8192
[[webhooks.routes]]
name = "ghfile"
path = "/hooks/github-file"
{gh}prompt = "A GitHub event arrived; its whole body is in the file named below."
fields = ["action"]
body_file = true
[[webhooks.routes]]
name = "stripe"
path = "/hooks/stripe"
auth = "stripe"
secrets = ["STRIPE_HOOK_SECRET"]
tolerance_s = 300
delivery_header = ""
dedupe_window = "24h"
prompt = "A payment event arrived."
fields = ["type"]
[[webhooks.routes]]
name = "limited"
path = "/hooks/limited"
auth = "bearer"
secrets = ["LIMITED_TOKEN"]
delivery_header = ""
dedupe_window = "1h"
prompt = "A limited event arrived."
rate_per_minute = 6
rate_burst = 2
[[webhooks.routes]]
name = "hold"
path = "/hooks/hold"
{gh}prompt = "{HOLD}"
fields = ["pull_request.title"]
queue_max = 1
[[webhooks.routes]]
name = "flood"
path = "/hooks/flood"
{gh}prompt = "never reached"
rate_per_minute = 0
max_body_bytes = 1024
"""


class Model:
    """The scripted model: a delivery's prompt → ``answered <mark>`` (its first WH… mark); the hold route's
    prompt waits (bounded) until ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __call__(self, req: Any) -> dict[str, str]:
        said = prompt_of(req)
        if HOLD in said:
            self.release.wait(60)
        m = MARK.search(said)
        return {"text": f"answered {m.group(1) if m else 'nothing'}"}


class Tree:
    def __init__(self, home: GeodeHome, api: LocalBotApi, server: ScriptedServer, model: Model, port: int):
        self.home, self.api, self.server, self.model = home, api, server, model
        self.base = f"http://127.0.0.1:{port}"
        self.port = port
        self.pid = 0  # the webhooks child's pid once up
        self.last_mark, self.last_body = "", b""  # the delivery of the first test, whose prompt is read next

    def url(self, path: str) -> str:
        return self.base + path


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    base = tmp_path_factory.mktemp("hooks_tree")
    model, port = Model(), free_port()
    binding = (
        f'[messengers.telegram]\nbase_url = "{{api}}"\npoll_timeout_s = 1\n'
        f'[[messengers.bindings]]\nplatform = "telegram"\nchannel_id = "{CHAT}"\n'
    )
    with LocalBotApi() as api, ScriptedServer(model) as server:
        home = scripted_home(base, server, extra=binding.replace("{api}", api.base_url) + _routes(port))
        with home.env_file.open("a") as f:
            f.write(f"TELEGRAM_BOT_TOKEN={api.token}\nGH_HOOK_SECRET={GH_SECRET.decode()}\n")
            f.write(f"STRIPE_HOOK_SECRET={STRIPE_SECRET.decode()}\nLIMITED_TOKEN={TOKEN}\n")
        t = Tree(home, api, server, model, port)
        try:
            serve(home)
            t.pid = children(home)["webhooks"].pid
            yield t
        finally:
            model.release.set()
            stop(home)


def _child_unchanged(t: Tree) -> None:
    kid = children(t.home)["webhooks"]
    assert (kid.pid, kid.incarnation, kid.state) == (t.pid, 1, "running"), kid


def _done(t: Tree, reply: Any) -> dict[str, Any] | None:
    got = status_of(t.base, reply)
    return got if got["status"] == "done" else None


def test_the_tests_signer_matches_githubs_documented_vector() -> None:
    secret, payload, expected = GITHUB_VECTOR
    assert github_signature(secret, payload) == expected


def test_one_delivery_sent_five_times_at_once_and_again_later_runs_one_turn_and_posts_once(
    tree: Tree,
) -> None:
    t = tree
    assert status_children(t.home)["webhooks"]["state"] == "running"  # geode status lists the child
    m = mark()
    body = pr_body(m, UNSELECTED_CANARY=f"{m}-CANARY")
    headers = github_headers(GH_SECRET, body, f"delivery-{m}")
    replies = send_concurrently([(t.url("/hooks/github"), body, headers)] * 5, connections=5)
    assert sorted(r.status for r in replies) == [200, 200, 200, 200, 202], [
        (r.status, r.text) for r in replies
    ]
    turn_ids = {r.json["turn_id"] for r in replies}
    assert len(turn_ids) == 1, turn_ids  # every answer names the one turn
    first = next(r for r in replies if r.status == 202)
    done = wait_for(lambda: _done(t, first), 30.0, what="the delivery's turn done")
    assert done["answer"] == f"answered {m}", done
    posts = wait_posts(t.api, CHAT, 1)
    again = send(t.url("/hooks/github"), body, headers)  # the sender's retry after the turn ended
    assert again.status == 200 and again.json["turn_id"] in turn_ids, (again.status, again.text)
    assert again.json.get("status") == "done", again.text
    wait_for(lambda: (_done(t, first) or {}).get("delivery") == "posted" or None, 15.0, what="posted")
    assert [p["text"] for p in t.api.posts(CHAT)] == [f"answered {m}"] == [p["text"] for p in posts]
    assert marks_in(t.server.requests, m) == 1  # the model was asked once
    turns = turns_with(t.home, m)
    assert [x.turn_id for x in turns] == list(turn_ids)  # one turn record
    assert intake_counts(t.home)["gh"] == {"done": 1}, intake_counts(t.home)
    c = route_counters(t.home)["gh"]
    assert (c.accepted, c.replayed) == (1, 5), c
    t.last_mark, t.last_body = m, body
    _child_unchanged(t)


def _fenced(prompt: str) -> tuple[str, str, str]:
    """(before, inside, after) of the prompt's one untrusted-data block: a fence line (one token carrying a
    nonce) opens it and the one fence line with the same nonce closes it."""
    lines = prompt.splitlines()
    fences = [
        (i, n.group(0)) for i, ln in enumerate(lines) if " " not in ln.strip() and (n := NONCE.search(ln))
    ]
    nonces = {n for _, n in fences}
    assert len(fences) == 2 and len(nonces) == 1, f"not one fenced block:\n{prompt}"
    (i, _), (j, _) = fences
    return "\n".join(lines[:i]), "\n".join(lines[i + 1 : j]), "\n".join(lines[j + 1 :])


def test_the_prompt_holds_the_selected_fields_fenced_and_the_body_file_only_where_asked(tree: Tree) -> None:
    t = tree
    m, body = t.last_mark, t.last_body
    assert m, "the first delivery's test did not run"
    asked = [r for r in t.server.requests if m in json.dumps(r.body)]
    prompt = prompt_of(asked[0])
    before, inside, after = _fenced(prompt)
    assert INSTRUCTION in before  # the trusted instruction, outside the data
    for value in ('"opened"', f'"octo/{m}-repo"', f'"{m} fix the flaky test"', '"pull_request"'):
        assert value in inside, (value, prompt)  # each selected field (headers.X-GitHub-Event too)
    assert m not in before + after
    every = json.dumps([r.body for r in t.server.requests])
    assert f"{m}-CANARY" not in every and f"{m}-UNSELECTED-PR-BODY" not in every  # never selected
    assert GH_SECRET.decode() not in every and github_signature(GH_SECRET, body) not in every
    # the body-file route: the whole body is a file in its workspace; the first route's workspace has none
    f = mark()
    fbody = pr_body(f, UNSELECTED_CANARY=f"{f}-CANARY")
    r = send(t.url("/hooks/github-file"), fbody, github_headers(GH_SECRET, fbody, f"delivery-{f}"))
    assert r.status == 202, r.text
    wait_for(lambda: _done(t, r), 30.0, what="the body-file route's turn done")
    spaces = t.home.root / "workspaces"
    files = [p for p in (spaces / "hook-ghfile").rglob("*") if p.is_file() and f.encode() in p.read_bytes()]
    assert [p.read_bytes() for p in files] == [fbody], files  # the whole body, byte for byte
    assert (spaces / "hook-gh").is_dir()  # where the first route's turns ran
    gh_files = [p for p in (spaces / "hook-gh").rglob("*") if p.is_file()]
    assert [p for p in gh_files if m.encode() in p.read_bytes()] == [], gh_files
    fprompt = prompt_of(next(q for q in t.server.requests if f in json.dumps(q.body)))
    assert files[0].name in fprompt and f"{f}-CANARY" not in fprompt  # the file is named, not pasted


def _nothing_started(t: Tree, *marks: str) -> None:
    for x in marks:
        assert marks_in(t.server.requests, x) == 0, x
        assert turns_with(t.home, x) == [], x


def test_bad_input_gets_its_status_and_records_nothing_starts_nothing(tree: Tree) -> None:
    t = tree
    before = intake_counts(t.home)
    gh = t.url("/hooks/github")
    m = [mark() for _ in range(8)]
    body = pr_body(m[0])
    wrong = github_headers(b"not-the-secret", body, f"delivery-{m[0]}")
    assert send(gh, body, wrong).status == 401
    missing = {
        k: v for k, v in github_headers(GH_SECRET, pr_body(m[1]), f"d-{m[1]}").items() if "Signature" not in k
    }
    assert send(gh, pr_body(m[1]), missing).status == 401
    assert send(t.url("/hooks/nope"), body, github_headers(GH_SECRET, body, f"d-{m[0]}")).status == 404
    big = pr_body(m[2], padding="x" * 9000)
    assert send(gh, big, github_headers(GH_SECRET, big, f"d-{m[2]}")).status == 413
    bad_json = f'{{"action": "opened", "title": "{m[3]}"'.encode()  # cut short
    assert send(gh, bad_json, github_headers(GH_SECRET, bad_json, f"d-{m[3]}")).status == 400
    # stale: a Stripe signature that is right but an hour old (a fresh one with the same signer is taken)
    stripe = t.url("/hooks/stripe")
    fresh = json.dumps({"type": "invoice.paid", "id": m[4]}).encode()
    now = int(time.time())
    ok = send(stripe, fresh, {"Stripe-Signature": stripe_signature(STRIPE_SECRET, fresh, now)})
    assert ok.status == 202, ok.text
    stale = json.dumps({"type": "invoice.paid", "id": m[5]}).encode()
    old = send(stripe, stale, {"Stripe-Signature": stripe_signature(STRIPE_SECRET, stale, now - 3600)})
    assert old.status == 401, old.text
    # a flood over the rate limit (burst 2): two wrong tokens take the burst, then even the right one is 429
    lim = t.url("/hooks/limited")
    flood = [send(lim, b"{}", {"Authorization": "Bearer wrong"}) for _ in range(2)]
    flood += [
        send(lim, json.dumps({"n": i, "m": m[6]}).encode(), {"Authorization": f"Bearer {TOKEN}"})
        for i in range(6)
    ]
    assert [r.status for r in flood] == [401, 401] + [429] * 6, [(r.status, r.text) for r in flood]
    assert all(int(r.headers["retry-after"]) >= 1 for r in flood[2:])
    after = intake_counts(t.home)
    assert after.get("gh") == before.get("gh") and "limited" not in after, after  # nothing recorded
    assert intake_total(t.home, "stripe") == 1  # only the fresh one
    _nothing_started(t, m[0], m[1], m[2], m[3], m[5], m[6])
    c = route_counters(t.home)
    assert c["gh"].rejected.get("bad_signature") == 1 and c["gh"].rejected.get("missing") == 1, c["gh"]
    assert c["stripe"].rejected.get("stale") == 1, c["stripe"]
    assert c["limited"].rate_limited == 6, c["limited"]
    _child_unchanged(t)


def test_a_full_queue_answers_503_with_retry_after_and_records_nothing(tree: Tree) -> None:
    t = tree
    hold = t.url("/hooks/hold")
    a, b = mark(), mark()
    body_a, body_b = pr_body(a), pr_body(b)
    first = send(hold, body_a, github_headers(GH_SECRET, body_a, f"d-{a}"))
    assert first.status == 202, first.text
    wait_for(lambda: marks_in(t.server.requests, a) or None, 30.0, what="the held turn at the model")
    full = send(hold, body_b, github_headers(GH_SECRET, body_b, f"d-{b}"))
    assert full.status == 503 and int(full.headers["retry-after"]) >= 1, (
        full.status,
        full.headers,
        full.text,
    )
    assert intake_total(t.home, "hold") == 1
    t.model.release.set()
    wait_for(lambda: _done(t, first), 30.0, what="the held turn done")
    _nothing_started(t, b)
    assert route_counters(t.home)["hold"].rejected.get("queue_full") == 1
    retried = send(hold, body_b, github_headers(GH_SECRET, body_b, f"d-{b}"))  # the sender's retry: room now
    assert retried.status == 202, retried.text
    wait_for(lambda: _done(t, retried), 30.0, what="the retried delivery's turn done")
    _child_unchanged(t)


def test_ten_thousand_malformed_requests_do_not_grow_the_child(tree: Tree) -> None:
    t = tree
    body = json.dumps({"action": "opened", "n": "x" * 200}).encode()
    signed = github_headers(GH_SECRET, b"{not json", "d-flood")
    reqs = [
        raw_request("/hooks/flood", body, github_headers(b"wrong", body, "d-flood")),  # 401
        raw_request("/hooks/flood", body, {"Content-Type": "application/json"}),  # 401 missing
        raw_request("/hooks/no-such-route", body, {}),  # 404
        raw_request("/hooks/flood", b"{not json", signed),  # 400
    ]
    flood = Flood("127.0.0.1", t.port, reqs)
    before_rows = {route: sum(states.values()) for route, states in intake_counts(t.home).items()}
    warm = flood.run(1_000)
    assert sum(warm.values()) == 1_000 and set(warm) <= {400, 401, 404}, warm
    rss0 = rss_kib(t.pid)
    t0 = time.monotonic()
    seen = flood.run(10_000)
    took = time.monotonic() - t0
    rss1 = rss_kib(t.pid)
    print(f"\n10,000 malformed requests in {took:.1f}s: {seen}; RSS {rss0} -> {rss1} KiB")
    assert seen == {401: 5_000, 404: 2_500, 400: 2_500}, seen
    assert rss1 - rss0 < 5 * 1024, (rss0, rss1)
    after_rows = {route: sum(states.values()) for route, states in intake_counts(t.home).items()}
    assert after_rows == before_rows  # nothing recorded
    _child_unchanged(t)
