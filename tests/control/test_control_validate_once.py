"""A client's request frame is validated once by control: its envelope and body in one pass (issue 34 session
4, RELAY), and a refused body still gets ``bad_request`` after the connection's own checks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.protocol import catalog, codec
from geode.protocol import control as c
from geode.protocol.envelope import Envelope
from tests.control.harness import Client, ScriptedWorker, Tree


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Tree]:
    t = Tree(tmp_path)
    yield t
    t.close()


def _frame(type_: str, body: dict[str, Any]) -> tuple[str, bytes]:
    env = Envelope(type=type_, body=body)
    return env.id, codec.encode(env)


def test_a_prompt_frame_is_validated_once_and_runs(tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    ScriptedWorker(tree.reg).ready()
    cl = tree.client("c1")  # handshaken
    seen: list[str] = []
    envelope_validate = Envelope.model_validate.__func__  # type: ignore[attr-defined]
    parse_body = catalog.parse_body

    def counting_envelope(cls: type[Envelope], obj: Any, *args: Any, **kw: Any) -> Envelope:
        seen.append("Envelope")
        return envelope_validate(cls, obj, *args, **kw)  # type: ignore[no-any-return]

    def counting_body(type_: str, body: dict[str, Any]) -> Any:
        seen.append(f"body {type_}")
        return parse_body(type_, body)

    monkeypatch.setattr(Envelope, "model_validate", classmethod(counting_envelope))
    monkeypatch.setattr(catalog, "parse_body", counting_body)
    mid, frame = _frame(c.PROMPT, {"text": "hello"})
    tree.core.on_frame("c1", frame)
    assert seen == []  # before: the envelope, then the body again
    monkeypatch.undo()
    reply = cl.wait(lambda f: f.corr == mid)
    assert reply.kind == "ok"
    assert cl.wait_done(reply.body["turn_id"])["text"] == "answer to hello"


def test_a_refused_body_is_answered_after_the_connection_checks(tree: Tree) -> None:
    cl = Client(tree.core, "new")
    tree.clients["new"] = cl
    mid, frame = _frame(c.PROMPT, {"text": 5})
    tree.core.on_frame("new", frame)  # no handshake yet: that is what it is told, not the body
    assert cl.wait(lambda f: f.corr == mid).body["code"] == "not_ready"
    ready = tree.client("c1")
    mid, frame = _frame(c.PROMPT, {"text": 5})
    tree.core.on_frame("c1", frame)
    err = ready.wait(lambda f: f.corr == mid)
    assert err.kind == "error" and err.body["code"] == "bad_request"
    assert err.body["message"].startswith("invalid cli.prompt body at text: ")
