"""memory_save / memory_search through the real executor (built-in handlers, a real record store):
memory_save is a receipted mutation in the calling session's own scope (ctx.scope, never an argument), the
same operation re-sent is replayed from its receipt and not written twice, and an unapproved call in a chat
session writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from geode.memory.files import MemoryFiles
from geode.records.models import ReceiptState
from tests.tools.conftest import make_rig as make_rig  # the executor rig over a real store
from tests.tools.conftest import store as store
from tests.tools.conftest import workspace as workspace


def _rig(make_rig: Any, home: Path) -> Any:
    return make_rig(services={"memory": MemoryFiles(home, max_bytes=2_000)})


def test_memory_save_is_receipted_in_the_sessions_scope_and_replayed_not_rewritten(
    make_rig: Any, tmp_path: Path
) -> None:
    rig = _rig(make_rig, tmp_path / "h")
    ctx = rig.ctx(scope="chat:telegram-42", skip_permissions=True)
    from geode.tools.spec import ToolCall

    call = ToolCall(id="tu-1", name="memory_save", input={"action": "add", "text": "likes tea"})
    first = rig.executor.execute(ctx, call)
    assert not first.is_error, first.content
    path = tmp_path / "h/memory/chats/telegram-42/MEMORY.md"
    assert path.read_text() == "- likes tea\n"
    receipt = rig.store.client.get_receipt(ctx.operation_id)
    assert receipt is not None and receipt.state == ReceiptState.COMMITTED
    again = rig.executor.execute(ctx, call)  # the same operation (a resumed turn): its receipt answers
    assert again.content == first.content and path.read_text() == "- likes tea\n"
    assert not (tmp_path / "h/memory/MEMORY.md").exists()  # never the operator's


def test_the_scope_is_not_the_models_to_choose_and_search_reads_only_its_own(
    make_rig: Any, tmp_path: Path
) -> None:
    home = tmp_path / "h"
    MemoryFiles(home).save("operator", "add", "OPERATOR secret plan")
    rig = _rig(make_rig, home)
    forged = rig.call(
        "memory_save", {"action": "add", "text": "x", "scope": "operator"}, scope="chat:slack-C1"
    )
    assert forged.is_error and forged.error_type == "invalid_tool_input"
    assert (home / "memory/MEMORY.md").read_text() == "- OPERATOR secret plan\n"
    hits = rig.call("memory_search", {"query": "secret plan"}, scope="chat:slack-C1")
    assert not hits.is_error and hits.content["matches"] == []
    mine = rig.call("memory_search", {"query": "secret"}, scope="operator")
    assert [m["entry"] for m in mine.content["matches"]] == ["- OPERATOR secret plan"]


def test_over_the_cap_the_model_gets_a_clear_error_and_nothing_is_written(
    make_rig: Any, tmp_path: Path
) -> None:
    rig = _rig(make_rig, tmp_path / "h")
    ok = rig.call(
        "memory_save", {"action": "add", "text": "a" * 1900}, scope="job:nightly", skip_permissions=True
    )
    assert not ok.is_error
    full = rig.call(
        "memory_save", {"action": "add", "text": "b" * 500}, scope="job:nightly", skip_permissions=True
    )
    assert full.is_error and full.error_type == "memory_full" and "Nothing was written" in str(full.content)
    assert "b" not in (tmp_path / "h/memory/jobs/nightly/MEMORY.md").read_text()


def test_a_daemon_session_without_an_approval_writes_nothing(make_rig: Any, tmp_path: Path) -> None:
    rig = _rig(make_rig, tmp_path / "h")
    out = rig.call(
        "memory_save", {"action": "add", "text": "unapproved"}, scope="chat:telegram-42", mode="DAEMON"
    )
    assert out.is_error and out.error_type == "permission_denied" and out.executed is False
    assert not (tmp_path / "h/memory").exists()
