"""`geode webhooks`: with no daemon it lists config.toml's routes beside the intakes the store holds (rows
written first through the real intake table, in-process); with a running child it shows the child's counters
(a fake child behind the real codec: ``webhooks.routes``); `replay` asks the child and prints the new turn and
status url, or one line and the right exit code; `geode doctor` names a route's missing secret (never a value)
and warns about an open listener without trusted proxies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from actors.cli.main import build_app
from actors.tree import client as tree_client
from actors.tree.instance_lock import InstanceLock
from geode.home import GeodeHome
from geode.protocol import runtime
from geode.protocol import webhooks as wh
from geode.protocol.errors import NotFound
from geode.protocol.transport import LocalTransport, Request
from geode.records.engine import RecordEngine
from geode.records.intake_table import IntakeTable

CONFIG = """
[webhooks]
listen = "{listen}"
{proxies}

[[webhooks.routes]]
name = "github"
path = "/hooks/github"
auth = "github"
secrets = ["GITHUB_WEBHOOK_SECRET"]
prompt = "A GitHub event arrived."

[[webhooks.routes]]
name = "pay"
path = "/hooks/pay"
auth = "stripe"
secrets = ["STRIPE_OLD", "STRIPE_NEW"]
delivery_header = "Idempotency-Key"
prompt = "A payment event arrived."
"""


def cli(home: GeodeHome, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(build_app(), list(args), env={"GEODE_HOME": str(home.root), "COLUMNS": "200"})
    return r.exit_code, r.stdout, r.stderr


def make_home(
    tmp_path: Path, *, listen: str = "127.0.0.1:8787", proxies: str = "", env: str = ""
) -> GeodeHome:
    home = GeodeHome(tmp_path / "h").ensure()
    home.config_file.write_text(CONFIG.format(listen=listen, proxies=proxies))
    home.env_file.write_text(env)
    return home


def record(table: IntakeTable, route: str, key: str) -> Any:
    later = table.record_later(
        route, key, window_s=None, queue_max=10, headers={}, body=b"{}", client="127.0.0.1"
    )
    return later.result(10.0)


@pytest.fixture
def stored_home(tmp_path: Path) -> GeodeHome:
    """github: 3 intakes (one done, one submitted, one recorded); ``gone``: a route config.toml no longer
    names, with one recorded intake; ``pay``: none."""
    home = make_home(tmp_path, env="GITHUB_WEBHOOK_SECRET=x\nSTRIPE_OLD=y\nSTRIPE_NEW=z\n")
    engine = RecordEngine.for_home(home).open()
    try:
        table = IntakeTable(engine.renv, engine.writer)
        done, sub, _rec = (record(table, "github", f"d-{i}").row for i in range(3))
        record(table, "gone", "d-old")
        table.submitted_later("github", sub.delivery_id).result(10.0)
        table.submitted_later("github", done.delivery_id).result(10.0)
        table.answered_later("github", done.delivery_id, "natural", 12).result(10.0)
        table.done_later("github", done.delivery_id, "none", "").result(10.0)
    finally:
        engine.close()
    return home


def test_with_no_daemon_it_lists_the_configured_routes_and_the_stored_intakes(stored_home: GeodeHome) -> None:
    code, out, err = cli(stored_home, "webhooks", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["source"] == "store" and got["listen"] == "127.0.0.1:8787"
    assert "daemon is not running" in got["note"]
    routes = {r["name"]: r for r in got["routes"]}
    assert [r["name"] for r in got["routes"]] == ["github", "pay", "gone"]
    assert routes["github"]["stored"] == {"done": 1, "recorded": 1, "submitted": 1}
    assert routes["github"]["queued"] == 2 and routes["github"]["auth"] == "github"
    assert routes["pay"]["stored"] == {} and routes["pay"]["queued"] == 0
    assert routes["gone"]["configured"] is False and routes["gone"]["queued"] == 1

    code, out, err = cli(stored_home, "webhooks")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("webhooks: the daemon is not running")
    assert "github  /hooks/github  auth github" in lines
    assert "  stored intakes 3 (done 1, recorded 1, submitted 1) · queued 2" in lines
    assert any(line.startswith("gone  -") and "not in config.toml" in line for line in lines)


class FakeChild:
    """The webhooks child's two requests, answered as the real child's models say."""

    def __init__(self) -> None:
        self.replays: list[wh.Replay] = []
        self.error: dict[str, str] = {}

    def handle(self, request: Request) -> Any:
        if request.type == runtime.STATUS:
            per_route = {"github": {"accepted": 5, "replayed": 2, "rejected": {"stale": 1}, "queued": 2}}
            detail = {"listen": "127.0.0.1:8787", "routes": ["github"], "counters": per_route, "open": 2}
            return runtime.StatusReply(name="webhooks", incarnation=1, pid=1, detail=detail | self.error)
        if request.type == wh.ROUTES:
            counters = wh.RouteCounters(
                accepted=5,
                replayed=2,
                rejected={"bad_signature": 2, "stale": 1},
                rate_limited=1,
                queued=2,
                done=3,
            )
            github = wh.RouteView(
                name="github",
                path="/hooks/github",
                auth="github",
                deliver="telegram:-100123",
                counters=counters,
            )
            return wh.RoutesReply(listen="127.0.0.1:8787", routes=[github])
        assert isinstance(request.body, wh.Replay)
        self.replays.append(request.body)
        if request.body.delivery_id == "nope":
            raise NotFound("no stored delivery 'nope' (see `geode webhooks`)")
        new = f"{request.body.delivery_id}.replay-1"
        return wh.ReplayReply(
            route="github",
            delivery_id=new,
            turn_id="wh-github-abc",
            status_url="/status/wh-github-abc?token=t0k",
        )


@pytest.fixture
def child(monkeypatch: pytest.MonkeyPatch) -> FakeChild:
    fake = FakeChild()

    @contextmanager
    def bus(home: GeodeHome) -> Iterator[Any]:
        yield SimpleNamespace(transport=LocalTransport({"webhooks": fake}, sender="cli#1"))

    monkeypatch.setattr(tree_client, "is_running", lambda home: True)
    monkeypatch.setattr(tree_client, "client_bus", bus)
    return fake


def test_with_the_child_it_shows_the_childs_counters(stored_home: GeodeHome, child: FakeChild) -> None:
    code, out, err = cli(stored_home, "webhooks", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["source"] == "child" and got["routes"][0]["counters"]["rejected"] == {
        "bad_signature": 2,
        "stale": 1,
    }
    code, out, err = cli(stored_home, "webhooks")
    assert code == 0, err
    assert out.splitlines() == [
        "webhooks: listening on 127.0.0.1:8787",
        "github  /hooks/github  auth github -> telegram:-100123",
        "  accepted 5 · replayed 2 · rejected 3 (bad_signature 2, stale 1) · rate-limited 1 · queued 2 · "
        "done 3",
    ]


def test_a_child_that_does_not_answer_falls_back_to_the_store(
    stored_home: GeodeHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    @contextmanager
    def bus(home: GeodeHome) -> Iterator[Any]:
        yield SimpleNamespace(transport=LocalTransport({}, sender="cli#1"))  # no webhooks child

    monkeypatch.setattr(tree_client, "is_running", lambda home: True)
    monkeypatch.setattr(tree_client, "client_bus", bus)
    code, out, err = cli(stored_home, "webhooks", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["source"] == "store" and got["note"] == "the webhooks child does not answer"
    assert {r["name"]: r["queued"] for r in got["routes"]} == {"github": 2, "pay": 0, "gone": 1}


def test_replay_asks_the_child_and_prints_the_new_turn(stored_home: GeodeHome, child: FakeChild) -> None:
    code, out, err = cli(stored_home, "webhooks", "replay", "d-0", "--route", "github")
    assert code == 0, err
    assert [(r.delivery_id, r.route) for r in child.replays] == [("d-0", "github")]
    assert out.splitlines() == [
        "replayed github/d-0 as delivery d-0.replay-1: turn wh-github-abc",
        "status http://127.0.0.1:8787/status/wh-github-abc?token=t0k",  # on the configured listener
    ]
    code, out, err = cli(stored_home, "webhooks", "replay", "d-0", "--json")
    assert code == 0 and json.loads(out)["delivery_id"] == "d-0.replay-1"
    code, out, err = cli(stored_home, "webhooks", "replay", "nope")
    assert code == 2 and out == ""
    assert err.strip() == "geode webhooks replay: no stored delivery 'nope' (see `geode webhooks`)"


def test_status_shows_the_webhooks_child_when_it_runs(
    stored_home: GeodeHome, child: FakeChild, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = runtime.TreeStatus(
        pid=1, incarnation=1, state="running", children=[runtime.ChildInfo(name="webhooks", state="running")]
    )
    monkeypatch.setattr(InstanceLock, "is_held", lambda self: True)  # a tree holds the home
    monkeypatch.setattr(tree_client, "in_process_tree", lambda home: None)
    monkeypatch.setattr(tree_client, "tree_status", lambda home: tree)
    code, out, err = cli(stored_home, "status")
    assert code == 0, err
    assert (
        "webhooks: listening on 127.0.0.1:8787 · 1 route(s) · accepted 5 · replayed 2 · rejected 1 · "
        "rate-limited 0 · queued 2 (`geode webhooks`)"
    ) in out.splitlines()
    child.error = {"last_error": "store: unavailable\nretrying"}
    code, out, err = cli(stored_home, "status", "--json")
    assert code == 0, err
    assert json.loads(out)["webhooks"]["last_error"] == "store: unavailable\nretrying"
    code, out, err = cli(stored_home, "status")
    assert "  last error: store: unavailable retrying" in out.splitlines()


def test_replay_with_no_daemon_is_one_line_and_exit_1(stored_home: GeodeHome) -> None:
    code, out, err = cli(stored_home, "webhooks", "replay", "d-0")
    assert code == 1 and out == ""
    assert err.startswith("geode webhooks replay: the daemon is not running") and len(err.splitlines()) == 1


def test_doctor_names_a_missing_secret_and_warns_about_an_open_listener(tmp_path: Path) -> None:
    from actors.cli.doctor import run_checks

    home = make_home(tmp_path, listen="0.0.0.0:8787", env="STRIPE_OLD=sk-value-never-shown\n")
    checks = [c for c in run_checks(home) if c["name"] == "webhooks"]
    errors = [c["detail"] for c in checks if not c["ok"]]
    warnings = [c["detail"] for c in checks if c["ok"] and c["warn"]]
    assert len(errors) == 2 and "route github: GITHUB_WEBHOOK_SECRET missing from" in errors[0]
    assert "route pay: STRIPE_NEW missing" in errors[1]
    assert not any("sk-value-never-shown" in c["detail"] for c in checks)
    assert len(warnings) == 1 and "'0.0.0.0:8787' is not a loopback address" in warnings[0]

    fine = make_home(
        tmp_path / "fine",
        listen="0.0.0.0:8787",
        proxies='trusted_proxies = ["10.0.0.1"]',
        env="GITHUB_WEBHOOK_SECRET=a\nSTRIPE_OLD=b\nSTRIPE_NEW=c\n",
    )
    assert [c for c in run_checks(fine) if c["name"] == "webhooks"] == []
