"""Image blocks through every wire adapter and the real SDKs: read and verified at projection time, a text
note for a model without image input or a missing/altered file, and never bytes in a checkpoint."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from geode.conversation import ImageBlock, Message, TextBlock
from geode.loop.compaction import IMAGE_TOKENS, estimate_tokens
from geode.providers.catalogue import model_info
from geode.providers.types import ModelRequest
from geode.testing.scenario import Scenario
from tests.providers.conftest import WIRES, build

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40  # not a real picture: the adapters never decode it
VISION = {
    "anthropic-messages": "claude-opus-5-5",
    "openai-chat": "gpt-6-sol",
    "openai-responses": "gpt-6-sol",
}


def _image(tmp_path: Path, data: bytes = PNG) -> ImageBlock:
    path = tmp_path / "inbox" / "42" / "cat.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return ImageBlock(
        media_type="image/png", sha256=hashlib.sha256(data).hexdigest(), path=str(path), size=len(data)
    )


def _ask(wire, server, fake_time, model: str, block: ImageBlock):
    server.set_scenario(Scenario.of("a cat"))
    msg = Message(role="user", content=(TextBlock(text="what is this?"), block))
    req = ModelRequest(model=model, messages=(msg,), stream=False, max_tokens=64)
    build(wire, server, fake_time).complete(req)
    return server.requests[-1]


def _texts(body) -> str:
    parts = [p for m in body.get("messages", []) + body.get("input", []) for p in m.get("content") or []]
    return " ".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


@pytest.mark.parametrize("wire", WIRES)
def test_an_image_reaches_a_vision_model_as_an_image_part(wire, server, fake_time, tmp_path):
    block = _image(tmp_path)
    rec = _ask(wire, server, fake_time, VISION[wire], block)
    assert rec.images == [{"media_type": "image/png", "sha256": block.sha256}]
    assert "what is this?" in _texts(rec.body)


@pytest.mark.parametrize("wire", WIRES)
def test_a_changed_or_missing_file_becomes_a_text_note(wire, server, fake_time, tmp_path):
    block = _image(tmp_path)
    Path(block.path).write_bytes(PNG[:-1] + b"X")  # same size, other bytes
    rec = _ask(wire, server, fake_time, VISION[wire], block)
    assert rec.images == []
    assert "no longer matches its sha256" in _texts(rec.body)
    Path(block.path).unlink()
    rec = _ask(wire, server, fake_time, VISION[wire], block)
    assert rec.images == [] and "image cat.png not available" in _texts(rec.body)


def test_a_model_without_image_input_gets_a_note(server, fake_time, tmp_path):
    assert model_info("glm-5.3").image_input is False and model_info("claude-opus-5-5").image_input
    rec = _ask("openai-chat", server, fake_time, "glm-5.3", _image(tmp_path))
    assert rec.images == []
    assert "does not take image input" in _texts(rec.body)


def test_a_checkpointed_image_is_a_reference_whatever_its_size(tmp_path):
    small, big = _image(tmp_path, PNG), _image(tmp_path / "b", PNG * 200)
    dumps = [Message(role="user", content=(b,)).model_dump_json() for b in (small, big)]
    assert abs(len(dumps[0]) - len(dumps[1])) < 16 and len(dumps[1]) < 400
    assert Message.model_validate_json(dumps[1]).images == [big]


def test_bytes_that_are_not_the_media_type_or_too_large_become_a_note(
    server, fake_time, tmp_path, monkeypatch
):
    """A file a provider would refuse (it would fail every later request of the session) is never sent."""
    rec = _ask(
        "anthropic-messages", server, fake_time, "claude-opus-5-5", _image(tmp_path, b"%PDF-1.7 not a png")
    )
    assert rec.images == [] and "not a image/png file a model can take" in _texts(rec.body)
    monkeypatch.setattr("geode.providers.images.MAX_IMAGE_BYTES", len(PNG) - 1)
    rec = _ask("anthropic-messages", server, fake_time, "claude-opus-5-5", _image(tmp_path / "big"))
    assert rec.images == [] and "image cat.png not shown: over" in _texts(rec.body)


def test_a_picture_counts_as_what_it_costs_the_model_in_the_context_estimate(tmp_path):
    """Held by reference it is ~200 JSON characters; the model pays ~1,600 tokens for it, and compaction
    must know that to fit the window."""
    text = Message.user_text("look")
    with_image = Message(role="user", content=(TextBlock(text="look"), _image(tmp_path)))
    assert estimate_tokens([with_image]) - estimate_tokens([text]) >= IMAGE_TOKENS
