"""An MCP tool's structured result keyed by data travels as its JSON text, never as a msgpack map.

msgpack's unpacker interns every str map key it unpacks and CPython 3.12's interned strings are immortal: a
``-> dict[str, X]`` tool's result keyed by file names or user ids would stay for good in the loop worker (the
``tools.call`` reply) and the store (receipt, timeline row). Over a real MCP server, the executor and the
store (every request and record through msgpack), no data key is ever an unpacked map key, and the model,
hooks, receipts' replays and the ``⎿`` summary see what the map gave them (geode/tools/structured_text.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from geode.hooks.events import HookOutcome
from geode.loop.result_blocks import result_block
from geode.redaction import redact
from geode.tools.builtin.catalogue import builtin_handlers
from geode.tools.executor import ToolExecutor
from geode.tools.mcp.bridge import connect
from geode.tools.mcp.config import load_mcp_servers
from geode.tools.mcp.hub import McpHub
from geode.tools.plan import BoundToolPlan
from geode.tools.post_tool_use import post_tool_use
from geode.tools.receipts import replayed
from geode.tools.result_redaction import ResultRedactor
from geode.tools.result_summary import result_summary
from geode.tools.service import bounded
from geode.tools.spec import ToolCall, ToolContext, ToolResult
from geode.tools.structured_text import KEY, carry, expand, render
from tests.map_keys import Keys, watch_keys

SERVER = str(Path(__file__).with_name("mcp_structured_server.py"))
NAMES = ["zeta.txt", "ünï/файл", 'a"q', "2026-12-06"]
SECRET = "plainvalue-abcdef-1234"


@pytest.fixture
def hub() -> Iterator[McpHub]:
    h = McpHub()
    yield h
    h.close()


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> Keys:
    return watch_keys(monkeypatch)


def _config() -> dict[str, Any]:
    tools = {"sizes": {}, "tag": {"effect": "mutate", "resource_strategy": "global:tags"}}
    return {"mcpServers": {"s": {"command": sys.executable, "args": [SERVER], "tools": tools}}}


def test_data_keys_never_map_keys_and_the_model_text_is_unchanged(  # type: ignore[no-untyped-def]
    hub, store, tmp_path, keys, monkeypatch
) -> None:
    monkeypatch.setenv("STRUCT_TEST_TOKEN", SECRET)  # a secret-named variable: its value masked in results
    specs, handlers = connect(hub, load_mcp_servers(_config()))
    ex = ToolExecutor(
        owner="executor#1",
        records=store.client,
        handlers={**builtin_handlers(), **handlers},
        default_workspace=tmp_path,
    )
    plan = BoundToolPlan.build(specs)
    ex.bind_plan(plan)

    def run(name: str, args: dict[str, Any], n: int) -> ToolResult:
        ctx = ToolContext(
            session_id="s",
            turn_id="t",
            step_id=f"st{n}",
            operation_id=f"op{n}",
            plan_hash=plan.content_hash,
            plan_generation=plan.generation,
            workspace=str(tmp_path),
        )
        result = ex.execute(ctx, ToolCall(id=f"c{n}", name=name, input=args))
        # the executor's tools.call reply, as the loop worker unpacks it
        return ToolResult.model_validate(msgpack.unpackb(msgpack.packb(result.model_dump(mode="json"))))

    read = run("mcp__s__sizes", {"names": NAMES}, 1)
    assert not read.is_error, read
    assert set(read.content) == {KEY}
    # what json.dumps(map, ensure_ascii=False) made of the map before: the model sees the same characters
    golden = '{"zeta.txt": 8, "ünï/файл": 8, "a\\"q": 3, "2026-12-06": 10}'
    assert result_block(read).content == golden
    assert expand(read.content) == {n: len(n) for n in NAMES}

    tagged = run("mcp__s__tag", {"names": NAMES[:2], "secret": SECRET}, 2)  # receipted, a secret masked
    assert not tagged.is_error and set(tagged.content) == {KEY}, tagged
    masked = "token [REDACTED:env:STRUCT_TEST_TOKEN]"
    want = {NAMES[0]: "tagged", NAMES[1]: "tagged", "note": masked, "redacted": {"env:STRUCT_TEST_TOKEN": 1}}
    assert expand(tagged.content) == want and SECRET not in str(tagged.content)
    # the loop's executor client adds the operation id beside it, as it did to the map
    with_op = tagged.model_copy(update={"content": {**tagged.content, "operation_id": "op2"}})
    old = '{"zeta.txt": "tagged", "ünï/файл": "tagged", "note": "%s", '
    old += '"redacted": {"env:STRUCT_TEST_TOKEN": 1}, "operation_id": "op2"}'
    assert result_block(with_op).content == old % masked
    receipt = store.client.get_receipt("op2")
    assert receipt is not None and receipt.state.value == "committed"
    again = replayed(ToolCall(id="c9", name="mcp__s__tag"), receipt.result or {})  # a replay
    stored_map = redact(want, max_str=12_000, max_items=128)  # what the receipt kept of the map before
    assert result_block(again).content == json.dumps(stored_map, ensure_ascii=False)
    ex.shutdown()  # the timeline rows are written
    assert not keys.seen & set(NAMES), keys.seen & set(NAMES)  # every unpacked map: no data key


def test_readers_see_what_the_map_gave_them() -> None:
    data = {"b.txt": {"bytes": 3}, "files": ["x", "y"], "ünï": "Bearer abcdefghijklmnopqrstuvwxyz0123456789"}
    plain = ToolResult(tool_use_id="c", name="mcp__s__t", content=data, executed=True)
    text = plain.model_copy(update={"content": carry(data)})
    assert render(text.content) == result_block(plain).content == result_block(text).content
    assert result_summary(text) == result_summary(plain) == "2 files"
    # the secret masking: the same masked object (and count) as the map had, still carried as text
    redactor = ResultRedactor(environ={"MY_API_KEY": "literal-secret-99"})
    for extra in ({}, {"note": "literal-secret-99"}):
        old = redactor.apply(plain.model_copy(update={"content": {**data, **extra}}))
        new = redactor.apply(text.model_copy(update={"content": carry({**data, **extra})}))
        assert set(new.content) == {KEY} and expand(new.content) == old.content
        assert result_block(new).content == result_block(old).content
    # hooks' tool_response is the object
    seen: list[Any] = []

    class Hooks:
        idle = False

        def run(self, event: Any, payload: dict[str, Any], correlation: Any) -> HookOutcome:
            seen.append(payload["tool_response"])
            return HookOutcome()

    from geode.tools.builtin.catalogue import builtin_specs

    spec = next(s for s in builtin_specs() if s.name == "read_file")
    ctx = ToolContext(session_id="s", turn_id="t", step_id="st", operation_id="o", workspace="/")
    post_tool_use(Hooks(), ctx, spec, ToolCall(id="c", name="read_file"), text)  # type: ignore[arg-type]
    assert seen == [data]
    # an oversized result's preview is the model's text, cut as before
    big = {f"k{i}": "v" * 50 for i in range(100)}
    old_b = bounded(plain.model_copy(update={"content": big}), limit=2000)
    new_b = bounded(plain.model_copy(update={"content": carry(big)}), limit=2000)
    assert new_b.content == old_b.content and old_b.content["_truncated"] is True


def test_content_blocks_with_a_meta_map_are_carried_the_others_not(tmp_path: Path) -> None:
    """A content block's ``_meta`` is the server's free-form map: such a result is carried as text too."""
    from mcp.types import CallToolResult, TextContent

    from geode.tools.handlers import ToolEnv
    from geode.tools.mcp.bridge import _handler

    class Hub:
        def __init__(self, result: CallToolResult) -> None:
            self.result = result

        def call(self, *a: Any, **kw: Any) -> CallToolResult:
            return self.result

    class Cfg:
        name, timeout_s = "s", 5.0

    ctx = ToolContext(session_id="s", turn_id="t", step_id="st", operation_id="o", workspace=str(tmp_path))
    env = ToolEnv(ctx=ctx, workspace=tmp_path, roots=(tmp_path,), deadline_s=10.0)
    blocks = [TextContent(type="text", text="a", _meta={"user-42": 1}), TextContent(type="text", text="b")]
    meta = _handler(Hub(CallToolResult(content=blocks)), Cfg(), "t", True).fn({}, env)  # type: ignore[arg-type]
    plain = [TextContent(type="text", text="a"), TextContent(type="text", text="b")]
    kept = _handler(Hub(CallToolResult(content=plain)), Cfg(), "t", True).fn({}, env)  # type: ignore[arg-type]
    unpacked = Keys()
    unpacked.walk(msgpack.unpackb(msgpack.packb(meta)))
    assert set(meta) == {KEY} and "user-42" not in unpacked.seen, unpacked.seen
    want = {"content": [{"type": "text", "text": "a", "meta": {"user-42": 1}}, {"type": "text", "text": "b"}]}
    assert expand(meta) == want and render(meta) == json.dumps(want, ensure_ascii=False)
    assert kept == {
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    }  # a map, as before
