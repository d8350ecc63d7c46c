"""A long conversation's round costs what the round adds (issue 34, LOOPHIST): the kept messages go to the
socket as the pieces they were joined into (never copied into one buffer per request), under the body's
Content-Length, and the server still reads the body ``build_body`` describes — grown, compacted in the
middle, with a picture among them, retried after a dropped connection, through every wire."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from geode.conversation import Message, TextBlock, ToolResultBlock, ToolUseBlock
from geode.loop.summarize import effective_history, is_record
from geode.providers.adapter_base import BIG, body_chunks
from geode.providers.types import ModelRequest
from geode.testing.scenario import Scenario, ScriptedReply
from tests.providers.conftest import MODELS, WEATHER, WIRES, build
from tests.providers.test_images import _image, _texts

ANTHROPIC = "anthropic-messages"


def _round(i: int) -> list[Message]:
    call = ToolUseBlock(id=f"call_{i}", name="get_weather", input={"city": f"Oslo-{i}", "ü": "ß"})
    text = json.dumps({"temp": i, "sky": "☁", "note": "clear skies over the fjord " * 12})
    return [
        Message(role="assistant", content=(call,)),
        Message(role="user", content=(ToolResultBlock(tool_use_id=f"call_{i}", content=text),)),
    ]


def _history(rounds: int) -> list[Message]:
    out = [Message.user_text("weather, one city a round")]
    for i in range(rounds):
        out += _round(i)
    return out


def _request(
    wire: str, messages: list[Message], session: str = "s-long", stream: bool = False
) -> ModelRequest:
    return ModelRequest(
        model=MODELS[wire],
        messages=tuple(messages),
        tools=(WEATHER,),
        stream=stream,
        metadata={"session_id": session},
    )


def _expected(adapter: Any, req: ModelRequest) -> Any:
    return json.loads(json.dumps(adapter.build_body(req)))


def _headers(rec: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in rec.headers.items()}


def test_a_long_history_is_sent_in_its_pieces_and_arrives_whole(server, fake_time):
    """150 rounds (~0.1 MB): the body goes out in several chunks under one Content-Length (no chunked
    encoding), the server reads what ``build_body`` describes, streamed or not, round after round."""
    server.set_scenario(Scenario.of(*["ok"] * 4))
    adapter = build(ANTHROPIC, server, fake_time)
    history = _history(150)
    for i, stream in enumerate((False, True, False, True)):
        req = _request(ANTHROPIC, history, stream=stream)
        chunks = body_chunks(adapter.wire_body(req))
        assert len(chunks) >= 3 and sum(map(len, chunks)) > BIG
        adapter.complete(req)
        rec = server.requests[-1]
        assert rec.body == _expected(adapter, req)
        assert "transfer-encoding" not in _headers(rec)
        assert int(_headers(rec)["content-length"]) == len(b"".join(body_chunks(adapter.wire_body(req))))
        history += _round(1000 + i)


def test_a_round_joins_what_it_adds_not_the_history(fake_time, server):
    """The work count: over 200 rounds the kept params are joined again O(log n) times each (pieces merged
    while of a size), never once a request: the first request's history (~0.9 MB) is one piece handed to the
    socket as it is every round, and a request has O(log n) chunks; the old body encoder copied the whole
    history three to four times a request."""
    adapter = build(ANTHROPIC, server, fake_time)
    history = _history(1500)
    first = body_chunks(adapter.wire_body(_request(ANTHROPIC, history)))
    whole = max(first, key=len)
    assert len(whole) > 500_000
    encoded, copied, added = adapter._history.encoded, adapter._history.copied, 0
    rounds = 200
    for i in range(rounds):
        history += _round(2000 + i)
        chunks = body_chunks(adapter.wire_body(_request(ANTHROPIC, history)))
        added += sum(len(adapter._history._memo.get(m, bytes)) for m in history[-2:])
        assert any(c is whole for c in chunks)  # sent as it is: not copied, not rebuilt
        assert len(chunks) <= math.log2(sum(map(len, chunks)) / BIG) + 4
    assert adapter._history.encoded - encoded == 2 * rounds  # only each round's two messages encoded
    assert adapter._history.copied - copied <= added * (math.log2(rounds) + 2)  # amortized O(new log n)


def test_a_fresh_equal_copy_at_the_head_is_not_encoded_again(fake_time, server):
    """The compacted floor rebuilds its leading note message every round (an equal copy): the history
    after it is still reused, not encoded nor joined again."""
    adapter = build(ANTHROPIC, server, fake_time)
    history = _history(400)
    note = Message(role="user", content=(TextBlock(text="[system:compaction] 40 earlier messages omitted."),))
    whole = max(body_chunks(adapter.wire_body(_request(ANTHROPIC, [note, *history]))), key=len)
    encoded = adapter._history.encoded
    for i in range(5):
        history += _round(3000 + i)
        again = note.model_copy()  # a new object, equal to the last request's
        req = _request(ANTHROPIC, [again, *history])
        chunks = body_chunks(adapter.wire_body(req))
        assert json.loads(b"".join(chunks)) == _expected(adapter, req)
        assert adapter._history.encoded - encoded == 2
        assert any(c is whole for c in chunks)
        encoded = adapter._history.encoded


@pytest.mark.parametrize("wire", WIRES)
def test_a_view_changed_in_the_middle_and_another_session_are_sent_right(wire, server, fake_time):
    """A compacted view (messages elided and dropped inside the kept pieces), a shorter history, another
    conversation in between and growth again: each body is the one ``build_body`` describes."""
    server.set_scenario(Scenario.of(*["ok"] * 6))
    adapter = build(wire, server, fake_time)
    history = _history(130)
    elided = [*history[:201], Message.user_text("[elided]"), *history[202:]]
    other = _history(20)
    sent = [history, elided, other[:5], [*elided, *_round(7000)], history[:110], [*history, *_round(7001)]]
    for n, messages in enumerate(sent):
        req = _request(wire, messages, session="s-other" if n == 2 else "s-long")
        adapter.complete(req)
        assert server.requests[-1].body == _expected(adapter, req)


def test_a_retry_after_a_dropped_connection_sends_the_whole_body_again(server, fake_time):
    server.set_scenario(Scenario.of(ScriptedReply(drop_connection=True), "ok"))
    adapter = build(ANTHROPIC, server, fake_time)
    req = _request(ANTHROPIC, _history(300), stream=True)
    response = adapter.complete(req)
    assert response.attempts == 2
    assert [r.body for r in server.requests] == [_expected(adapter, req)] * 2


def test_a_picture_inside_a_long_history_is_verified_on_every_request(server, fake_time, tmp_path: Path):
    server.set_scenario(Scenario.of("ok", "ok"))
    adapter = build(ANTHROPIC, server, fake_time)
    block = _image(tmp_path)
    history = [*_history(120), Message(role="user", content=(TextBlock(text="look"), block)), *_history(120)]
    req = _request(ANTHROPIC, history)
    adapter.complete(req)
    assert server.requests[-1].images
    assert server.requests[-1].body == _expected(adapter, req)
    Path(block.path).write_bytes(b"something else")
    history += _round(8000)
    adapter.complete(_request(ANTHROPIC, history))
    assert server.requests[-1].images == []
    assert "cat.png" in _texts(server.requests[-1].body)


def _record(text: str, covers: int) -> Message:
    meta = {"origin": "compaction", "covers": covers, "compaction_id": f"cmp-{covers}"}
    return Message(role="user", content=(TextBlock(text=text),), metadata=meta)


@pytest.mark.parametrize("merged", [True, False])
def test_a_summarized_history_leads_with_the_same_message_every_round(merged, server, fake_time):
    """After a summarizing compaction the view starts with the summary (merged into the first kept user
    message, or a message of its own): the same object every round, so the round's request encodes only the
    round's messages; the view is the history from the point the summary covers, records left out."""
    adapter = build(ANTHROPIC, server, fake_time)
    history = _history(30)  # 61 messages
    history.append(_record("## Goal\nan older summary", covers=10))  # 61
    history.append(Message.user_text("and now the coast"))  # 62
    history += _round(9000)  # 63, 64
    covers = 62 if merged else 63
    summary = "## Goal\nweather for every city"
    history.append(_record(summary, covers=covers))
    history += _round(9001)
    first, encoded = None, None
    for i in range(4):
        history += _round(9100 + i)
        view = effective_history(history)
        kept = [m for m in history[covers:] if not is_record(m)]
        if merged:
            assert view[0].content == (TextBlock(text=summary), *kept[0].content)
            assert view[1:] == kept[1:]
        else:
            assert view[0].text == summary
            assert view[1:] == kept
        assert first is None or view[0] is first  # (a new copy every round before)
        first = view[0]
        adapter.wire_body(_request(ANTHROPIC, view))
        if encoded is not None:
            assert adapter._history.encoded - encoded == 2
        encoded = adapter._history.encoded
