"""Messenger ids are deterministic, bounded and distinct; a binding's session is DAEMON mode, narrowed by the
binding and never widened past the DAEMON denylist."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.home_secrets import session_id_key
from geode.messengers.config import MessengerBinding
from geode.messengers.session_spec import daemon_session_settings
from geode.messengers.sessions import dedupe_key, reply_operation_id, session_id_for, turn_id_for
from geode.protocol import lanes as lanes_msg
from geode.protocol.errors import ConfigError
from geode.protocol.messengers import DeliverReply
from geode.sessions.factory import SessionSpec
from geode.tools.catalogue_plans import builtin_catalogue
from geode.tools.plan import BoundToolPlan, compile_plan

CHATS = ["42", "-1001234567890", "-1001234567890:5", "-1001234567890:6", "C0123ABCD:1712345678.123456"]
LONG = "x" * 500
KEY = bytes(range(32))  # a home keeps its own in keys/session-id.key


def _printable_and_bounded(value: str) -> bool:
    return 0 < len(value) <= 128 and value.isprintable() and " " not in value


def test_ids_are_deterministic() -> None:
    assert session_id_for("telegram", "-100:5", 3, KEY) == session_id_for("telegram", "-100:5", 3, KEY)
    assert turn_id_for("telegram", "-100:5", "77") == turn_id_for("telegram", "-100:5", "77")
    assert dedupe_key("telegram", "-100", "77") == dedupe_key("telegram", "-100", "77")
    tid = turn_id_for("telegram", "-100", "77")
    assert reply_operation_id(tid) == reply_operation_id(tid) != tid


def test_ids_are_printable_and_bounded_even_for_long_or_odd_parts() -> None:
    for chat, msg in itertools.product([*CHATS, LONG, "chat with spaces/ünïcode\n"], ["1", LONG, "a b\tc"]):
        ids = [session_id_for("telegram", chat, 10**18, KEY), turn_id_for("slack", chat, msg)]
        ids += [dedupe_key("discord", chat, msg), reply_operation_id(turn_id_for("telegram", chat, msg))]
        assert all(_printable_and_bounded(i) for i in ids), ids
    assert reply_operation_id(LONG) != reply_operation_id(LONG + "y")  # an over-long turn id is hashed
    assert _printable_and_bounded(reply_operation_id(LONG))


def test_ids_fit_the_protocol_fields() -> None:
    sid, tid = session_id_for("telegram", CHATS[2], 0, KEY), turn_id_for("telegram", CHATS[2], "9")
    lanes_msg.Submit(turn_id=tid, session_id=sid, mode="DAEMON", origin="messengers")
    DeliverReply(operation_id=reply_operation_id(tid), session_id=sid, turn_id=tid, channel="t:1", text="x")


def test_ids_are_distinct_across_chats_topics_generations_and_messages() -> None:
    long_a, long_b = LONG + "a", LONG + "b"  # the same readable prefix: the hash tells them apart
    chats = [*CHATS, long_a, long_b, "a_b", "a b"]  # "a b" is cleaned to "a_b" in the readable part
    sessions = {session_id_for(p, c, g, KEY) for p in ("telegram", "slack") for c in chats for g in range(3)}
    assert len(sessions) == 2 * len(chats) * 3
    turns = {turn_id_for("telegram", c, m) for c in chats for m in ("1", "2", "12")}
    dedupes = {dedupe_key("telegram", c, m) for c in chats for m in ("1", "2", "12")}
    assert len(turns) == len(dedupes) == len(chats) * 3
    assert turn_id_for("telegram", "1", "23") != turn_id_for("telegram", "12", "3")
    assert session_id_for("telegram", "-100", 0, KEY) != session_id_for("telegram", "-100", 1, KEY)


def test_a_negative_generation_is_refused() -> None:
    with pytest.raises(ValueError):
        session_id_for("telegram", "42", -1, KEY)


def test_the_session_key_is_made_once_0600_in_the_home_and_keys_the_ids(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "gh").ensure()
    key = session_id_key(home)
    path = home.keys_dir / "session-id.key"
    assert len(key) == 32 and (path.stat().st_mode & 0o777) == 0o600
    assert session_id_key(home) == key  # read back, not made again
    assert session_id_for("telegram", "42", 0, key) != session_id_for("telegram", "42", 0, KEY)
    path.chmod(0o644)  # readable by others: it may have leaked, so it is refused, not used
    with pytest.raises(ConfigError, match="readable by others"):
        session_id_key(home)
    with pytest.raises(ValueError):
        session_id_for("telegram", "42", 0, b"short")


# --- the DAEMON session of a binding ------------------------------------------------------------------


class _Plans:
    """A plan source like CataloguePlans: the built-in catalogue, from the executor or the fallback."""

    def __init__(self, from_executor: bool = True) -> None:
        self.from_executor = from_executor
        self.asked = 0

    def base(self) -> BoundToolPlan:
        self.asked += 1
        return compile_plan(builtin_catalogue())


@pytest.fixture
def home(tmp_path: Path) -> GeodeHome:
    return GeodeHome(tmp_path / "gh").ensure()


def _settings(home: GeodeHome, binding: MessengerBinding, plans: Any = None, **kw: Any) -> dict[str, Any]:
    return daemon_session_settings(
        binding,
        home=home,
        session_id="s-chat",
        workspace=home.root / "workspace",
        plans=_Plans() if plans is None else plans,
        env={},
        **kw,
    )


def test_a_binding_session_is_daemon_and_denies_run_bash(home: GeodeHome) -> None:
    binding = MessengerBinding(platform="telegram", channel_id="42")
    s = _settings(home, binding)
    assert s["mode"] == "DAEMON" and s["origin"] == "messengers" and s["session_id"] == "s-chat"
    assert s["approvals"] == "deny" and s["hitl_level"] == 0 and s["skip_permissions"] is False
    assert {"run_bash", "delegate_task", "computer"} <= set(s["denied_tools"])
    assert "run_bash" not in s["visible_tools"] and "read_file" in s["visible_tools"]
    assert s["allowed_tools"] is None and s["time_budget_s"] == 120.0
    assert s["workspace"] == str((home.root / "workspace").resolve()) and s["plan_hash"]
    assert "plan" not in s
    spec = SessionSpec.model_validate(s)  # the dict is a SessionSpec, as control submits it
    assert not spec.permits("run_bash") and spec.permits("read_file")


def test_allowed_tools_narrow_and_never_widen(home: GeodeHome) -> None:
    binding = MessengerBinding(
        platform="telegram", channel_id="42", allowed_tools=["read_file", "run_bash", "delegate_task"]
    )
    s = _settings(home, binding)
    assert s["visible_tools"] == ["read_file"]  # narrowed to the binding's list
    assert s["allowed_tools"] == ["read_file"]  # run_bash, delegate_task: still denied, not allowed
    assert "run_bash" in s["denied_tools"]
    spec = SessionSpec.model_validate(s)
    assert not spec.permits("run_bash") and not spec.permits("write_file") and spec.permits("read_file")


def test_the_bindings_time_budget_is_the_turn_budget(home: GeodeHome) -> None:
    binding = MessengerBinding(platform="telegram", channel_id="42", time_budget_s=30)
    assert _settings(home, binding)["time_budget_s"] == 30.0


def test_without_the_executors_catalogue_no_plan_hash_is_claimed(home: GeodeHome) -> None:
    binding = MessengerBinding(platform="telegram", channel_id="42")
    fallback = _Plans(from_executor=False)
    s = _settings(home, binding, plans=fallback)
    assert fallback.asked == 1 and (s["plan_hash"], s["plan_generation"]) == ("", 0)
    assert "run_bash" in s["denied_tools"]


def test_computer_use_stays_denied_unless_the_operator_enabled_it(home: GeodeHome) -> None:
    binding = MessengerBinding(platform="telegram", channel_id="42", allowed_tools=["computer", "read_file"])
    assert _settings(home, binding)["allowed_tools"] == ["read_file"]
    home.config_file.write_text("[daemon]\nallow_computer_use = true\n")
    assert "computer" in _settings(home, binding)["allowed_tools"]
