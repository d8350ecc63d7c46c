"""The webhook runner (geode/webhooks/runner.py) in process, with fake ports: a recorded intake becomes one
AUTOMATION turn submitted under its turn id, marked submitted with a ``webhook.intake`` timeline event
(never the body), followed to its end, answered, its answer posted once under ``reply-<turn_id>`` and the
intake done with the receipt's word; a deferred post is retried with backoff; a starting runner takes over
every open intake; a failing port leaves that intake for the next pass and the others go on."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from geode.protocol.errors import Unavailable
from geode.records.intake_models import IntakeRow
from geode.records.models import TimelineEvent
from geode.schedule.ports import Delivery, TurnEnd
from geode.webhooks.ids import delivery_turn_id
from geode.webhooks.runner import LOOK_S, Runner
from geode.webhooks.settings import RouteSpec

CHAT = "telegram:-100123"
BODY = {"action": "opened", "repository": {"full_name": "octo/repo"}, "secret_stuff": "CANARY-NOT-SELECTED"}


def route(name: str = "gh", **kw: Any) -> RouteSpec:
    spec: dict[str, Any] = {
        "name": name,
        "path": f"/hooks/{name}",
        "auth": "github",
        "secrets": ["GH_SECRET"],
        "prompt": "A GitHub event arrived. Summarize it.",
        "fields": ["action", "repository.full_name"],
        "deliver": CHAT,
        **kw,
    }
    return RouteSpec.model_validate(spec)


def row(delivery: str, route_name: str = "gh", state: str = "recorded", body: Any = BODY) -> IntakeRow:
    raw = json.dumps(body).encode()
    return IntakeRow(
        route=route_name,
        delivery_id=delivery,
        dedupe_key=delivery,
        turn_id=delivery_turn_id(route_name, delivery),
        received_at=datetime.now(UTC),
        headers={"X-GitHub-Event": "pull_request"},
        body=raw,
        body_sha256="x" * 64,
        state=state,  # type: ignore[arg-type]
    )


class FakeIntakes:
    def __init__(self, rows: Sequence[IntakeRow] = ()) -> None:
        self.rows = {(r.route, r.delivery_id): r for r in rows}
        self.calls: list[tuple[Any, ...]] = []

    def _step(self, key: tuple[str, str], **upd: Any) -> IntakeRow:
        self.rows[key] = self.rows[key].model_copy(update=upd)
        return self.rows[key]

    def open_rows(self) -> list[IntakeRow]:
        return [r for r in self.rows.values() if r.state != "done"]

    def submitted(self, route: str, delivery_id: str) -> IntakeRow:
        self.calls.append(("submitted", delivery_id))
        return self._step((route, delivery_id), state="submitted")

    def answered(self, route: str, delivery_id: str, termination_reason: str, answer_chars: int) -> IntakeRow:
        self.calls.append(("answered", delivery_id, termination_reason, answer_chars))
        return self._step(
            (route, delivery_id),
            state="answered",
            termination_reason=termination_reason,
            answer_chars=answer_chars,
        )

    def done(self, route: str, delivery_id: str, delivery: str, reason: str) -> IntakeRow:
        self.calls.append(("done", delivery_id, delivery, reason))
        return self._step((route, delivery_id), state="done", delivery=delivery, delivery_reason=reason)


class FakeLanes:
    def __init__(self) -> None:
        self.submits: list[tuple[str, str, dict[str, Any]]] = []
        self.ends: dict[str, TurnEnd] = {}
        self.looks = 0
        self.fail_submit: set[str] = set()

    def submit(self, row: IntakeRow, text: str, settings: dict[str, Any]) -> None:
        if row.delivery_id in self.fail_submit:
            raise Unavailable("lanes#1 exited with this request in flight")
        self.submits.append((row.turn_id, text, settings))

    def ended(self, turn_id: str) -> TurnEnd | None:
        self.looks += 1
        return self.ends.get(turn_id)


class FakeChat:
    def __init__(self, *answers: Delivery) -> None:
        self.answers = list(answers) or [Delivery(state="posted")]
        self.posts: list[tuple[str, str, str, str]] = []

    def post(
        self, row: IntakeRow, destination: str, text: str, *, session_id: str, operation_id: str
    ) -> Delivery:
        self.posts.append((destination, text, session_id, operation_id))
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class FakeTimeline:
    def __init__(self) -> None:
        self.events: list[TimelineEvent] = []

    def append(self, event: TimelineEvent) -> None:
        self.events.append(event)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make(
    tmp_path: Path,
    rows: Sequence[IntakeRow] = (),
    chat: FakeChat | None = None,
    **routes: RouteSpec,
) -> tuple[Runner, FakeIntakes, FakeLanes, FakeChat, FakeTimeline, Clock]:
    intakes, lanes, timeline, clock = FakeIntakes(rows), FakeLanes(), FakeTimeline(), Clock()
    chat = chat or FakeChat()

    def settings(rt: RouteSpec, r: IntakeRow) -> dict[str, Any]:
        return {"session_id": f"s-hook-{rt.name}-{r.delivery_id}", "workspace": str(tmp_path / rt.name)}

    runner = Runner(
        intakes,
        lanes,
        chat,
        timeline,
        routes=dict(routes) or {"gh": route()},
        settings=settings,
        workspace=lambda rt: tmp_path / f"hook-{rt.name}",
        clock=clock,
        wall=lambda: 1.7e9,
    )
    return runner, intakes, lanes, chat, timeline, clock


def test_an_intake_runs_once_to_its_posted_answer(tmp_path: Path) -> None:
    r1 = row("d-1")
    runner, intakes, lanes, chat, timeline, _ = make(tmp_path)
    runner.start()
    intakes.rows[("gh", "d-1")] = r1  # recorded by the HTTP app, then handed over
    runner.add(r1)
    runner.tick()
    assert [s[0] for s in lanes.submits] == [r1.turn_id]
    _, text, settings = lanes.submits[0]
    assert "Summarize it" in text and "octo/repo" in text and "CANARY-NOT-SELECTED" not in text
    assert settings["session_id"] == "s-hook-gh-d-1"
    assert intakes.rows[("gh", "d-1")].state == "submitted"
    (ev,) = timeline.events
    assert (ev.kind, ev.event_id, ev.session_id) == (
        "webhook.intake",
        f"intake-{r1.turn_id}",
        "s-hook-gh-d-1",
    )
    assert ev.payload["body_bytes"] == len(r1.body) and "CANARY" not in json.dumps(ev.payload)
    assert ev.payload["kept"] == {"X-GitHub-Event": "pull_request"}
    runner.tick()  # not ended yet: nothing more
    assert not chat.posts and intakes.rows[("gh", "d-1")].state == "submitted"
    lanes.ends[r1.turn_id] = TurnEnd(termination_reason="completed", text="The PR was opened.")
    runner.turn_done(r1.turn_id)  # lanes' origin event: looked at now, not after LOOK_S
    runner.tick()
    assert chat.posts == [(CHAT, "The PR was opened.", "s-hook-gh-d-1", f"reply-{r1.turn_id}")]
    assert intakes.calls[-2:] == [
        ("answered", "d-1", "completed", len("The PR was opened.")),
        ("done", "d-1", "posted", ""),
    ]
    assert runner.open_count() == 0
    runner.tick()
    assert len(lanes.submits) == 1 and len(chat.posts) == 1  # nothing twice


def test_the_stored_turn_is_looked_at_periodically_without_an_event(tmp_path: Path) -> None:
    r1 = row("d-2")
    runner, intakes, lanes, chat, _, clock = make(tmp_path, [r1])
    runner.tick()
    lanes.ends[r1.turn_id] = TurnEnd(termination_reason="completed", text="done")
    looks = lanes.looks
    runner.tick()
    assert lanes.looks == looks and not chat.posts  # within LOOK_S of the last look
    clock.t += LOOK_S
    runner.tick()
    assert intakes.rows[("gh", "d-2")].state == "done" and len(chat.posts) == 1


def test_a_starting_runner_takes_over_every_open_intake(tmp_path: Path) -> None:
    recorded, running, answered = row("a"), row("b", state="submitted"), row("c", state="answered")
    done = row("z", state="done")
    runner, intakes, lanes, chat, _, _ = make(tmp_path, [recorded, running, answered, done])
    lanes.ends[running.turn_id] = TurnEnd(termination_reason="completed", text="b answer")
    lanes.ends[answered.turn_id] = TurnEnd(termination_reason="completed", text="c answer")
    runner.tick()
    assert [s[0] for s in lanes.submits] == [recorded.turn_id]  # only the one never acknowledged
    assert sorted(p[1] for p in chat.posts) == ["b answer", "c answer"]
    assert {k[1]: v.state for k, v in intakes.rows.items()} == {
        "a": "submitted",
        "b": "done",
        "c": "done",
        "z": "done",
    }


def test_a_deferred_reply_is_retried_with_backoff_then_posted(tmp_path: Path) -> None:
    r1 = row("d-3", state="answered")
    chat = FakeChat(Delivery(state="deferred", reason="executor#1 exited"), Delivery(state="posted"))
    runner, intakes, lanes, _, _, clock = make(tmp_path, [r1], chat=chat)
    lanes.ends[r1.turn_id] = TurnEnd(termination_reason="completed", text="hello")
    runner.tick()
    assert len(chat.posts) == 1 and intakes.rows[("gh", "d-3")].state == "answered"
    clock.t += 0.5
    runner.tick()
    assert len(chat.posts) == 1  # backing off
    clock.t += 1.0
    runner.tick()
    assert len(chat.posts) == 2 and {p[3] for p in chat.posts} == {f"reply-{r1.turn_id}"}
    assert intakes.rows[("gh", "d-3")].delivery == "posted"


@pytest.mark.parametrize("word", ["refused", "uncertain"])
def test_a_settled_reply_is_done_with_the_receipts_word(tmp_path: Path, word: str) -> None:
    r1 = row("d-4", state="answered")
    runner, intakes, lanes, chat, _, _ = make(
        tmp_path, [r1], chat=FakeChat(Delivery(state=word, reason="nope"))
    )  # type: ignore[arg-type]
    lanes.ends[r1.turn_id] = TurnEnd(termination_reason="completed", text="hello")
    runner.tick()
    runner.tick()
    assert len(chat.posts) == 1
    assert intakes.calls[-1] == ("done", "d-4", word, "nope")


def test_a_route_without_a_chat_is_done_with_none(tmp_path: Path) -> None:
    r1 = row("d-5", route_name="quiet", state="submitted")
    runner, intakes, lanes, chat, _, _ = make(tmp_path, [r1], quiet=route("quiet", deliver=""))
    lanes.ends[r1.turn_id] = TurnEnd(termination_reason="completed", text="an answer nobody asked for")
    runner.tick()
    assert not chat.posts and intakes.calls[-1] == ("done", "d-5", "none", "no delivery chat")


def test_a_turn_without_an_answer_tells_the_chat_how_it_ended(tmp_path: Path) -> None:
    r1 = row("d-6", state="submitted")
    runner, intakes, lanes, chat, _, _ = make(tmp_path, [r1])
    lanes.ends[r1.turn_id] = TurnEnd(termination_reason="external_verification_required", text="  ")
    runner.tick()
    assert [text for _, text, _, _ in chat.posts] == [
        "The webhook run of route gh ended without an answer (external_verification_required)."
    ]
    assert intakes.calls[-1][:3] == ("done", "d-6", "posted")


def test_a_failing_submit_leaves_that_intake_for_the_next_pass(tmp_path: Path) -> None:
    bad, good = row("bad"), row("good")
    runner, intakes, lanes, _, _, _ = make(tmp_path, [bad, good])
    lanes.fail_submit.add("bad")
    runner.tick()
    assert (
        intakes.rows[("gh", "bad")].state == "recorded" and intakes.rows[("gh", "good")].state == "submitted"
    )
    assert "lanes#1 exited" in runner.last_error
    lanes.fail_submit.clear()
    runner.tick()
    assert intakes.rows[("gh", "bad")].state == "submitted"
    assert [s[0] for s in lanes.submits] == [good.turn_id, bad.turn_id]


def test_a_body_file_route_writes_the_body_into_its_workspace(tmp_path: Path) -> None:
    r1 = row("d-6", route_name="files")
    runner, _, lanes, _, _, _ = make(tmp_path, [r1], files=route("files", body_file=True))
    runner.tick()
    (_, text, _) = lanes.submits[0]
    files = list((tmp_path / "hook-files").rglob("*"))
    written = [f for f in files if f.is_file()]
    assert len(written) == 1 and json.loads(written[0].read_bytes()) == BODY
    assert written[0].name in text
