"""Issue 34 session 4, the executor's own work per read-only call, counted (never timed): each path is
resolved once (the workspace, the path argument; not the roots made of them again), plain input is accepted
without the full JSON Schema validator (whose answer the quick check never contradicts), the approval text
is worded only when someone sees it, the arguments are redacted once for the call's two rows, and a
session's plan is looked up without the cache's lock."""

from __future__ import annotations

import inspect
import os
import random
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from jsonschema import Draft202012Validator

import geode.tools.paths as paths_module
import geode.tools.timeline as timeline_module
from geode.hooks.runner import HookRunner
from geode.tools.builtin.catalogue import builtin_specs
from geode.tools.executor import ToolExecutor
from geode.tools.plan import BoundToolPlan
from geode.tools.plan_cache import PlanCache
from geode.tools.schema_check import SchemaDenial, validate_input
from geode.tools.schema_fast import compile_quick
from tests.tools.conftest import Rig


def _count(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, seen: Counter[str]) -> None:
    real: Callable[..., Any] = getattr(owner, name)

    def counted(*a: Any, **kw: Any) -> Any:
        seen[name] += 1
        return real(*a, **kw)

    static = isinstance(inspect.getattr_static(owner, name), staticmethod)
    monkeypatch.setattr(owner, name, staticmethod(counted) if static else counted)


def test_a_read_only_call_does_each_piece_of_its_own_work_once(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = make_rig()
    (rig.workspace / "sub").mkdir()
    (rig.workspace / "sub" / "a.txt").write_text("a\n")
    rig.call("glob_files", {"pattern": "*.txt", "path": "sub"})  # warm: the schema's validators are built
    found = str(rig.workspace.resolve() / "sub" / "a.txt")
    seen: Counter[str] = Counter()
    _count(monkeypatch, paths_module, "real_path", seen)
    _count(monkeypatch, os.path, "realpath", seen)
    _count(monkeypatch, Draft202012Validator, "iter_errors", seen)
    _count(monkeypatch, ToolExecutor, "_detail", seen)
    _count(monkeypatch, timeline_module, "redact", seen)
    _count(monkeypatch, threading, "Condition", seen)
    out = rig.call("glob_files", {"pattern": "*.txt", "path": "sub"}, session_id="s-work")
    assert not out.is_error, out.content
    assert out.content["files"] == [found], out.content
    assert rig.executor.timeline.flush(5)
    print(f"per read-only call: {dict(seen)}")
    # the workspace, the path argument at the policy check and in the handler; was 6 (the roots 3 times more)
    assert seen["real_path"] == 3
    assert seen["realpath"] == 0  # session 6: each path exists, the kernel resolves it (paths.real_path)
    assert seen["iter_errors"] == 0  # was 1: the full validator on plain input
    assert seen["_detail"] == 0  # was 1: the approval text of a call nobody is asked about
    assert seen["redact"] == 2  # the arguments once, the result's summary once; was 3
    assert seen["Condition"] == 0  # session 7: an inline call's Cooperative makes one only on use; was 1
    rows = rig.timeline("s-work")
    assert [r.kind for r in rows] == ["tool.called", "tool.completed"]
    assert rows[0].payload["arguments"] == rows[1].payload["arguments"] == {"pattern": "*.txt", "path": "sub"}


class _CountedLock:
    """A lock that counts how often it is taken (``with``)."""

    def __init__(self, real: Any, seen: Counter[str], name: str) -> None:
        self.real, self.seen, self.name = real, seen, name

    def __enter__(self) -> None:
        self.seen[self.name] += 1
        self.real.acquire()

    def __exit__(self, *exc: object) -> None:
        self.real.release()


def test_a_call_checks_its_turn_was_not_cancelled_without_the_executors_lock(
    make_rig: Callable[..., Rig],
) -> None:
    rig = make_rig()
    seen: Counter[str] = Counter()
    rig.executor._mu = _CountedLock(rig.executor._mu, seen, "lock")  # type: ignore[assignment]
    out = rig.call("glob_files", {"pattern": "*"})
    assert not out.is_error, out.content
    assert seen["lock"] == 2  # the call noted in flight and dropped again; was 6 (4 cancel checks)
    assert rig.executor.cancel("s1", "t-cancelled") == 0
    out = rig.call("glob_files", {"pattern": "*"}, turn_id="t-cancelled")
    assert out.is_error and out.error_type == "tool_cancelled"  # a cancelled turn's call still refused


def test_a_call_with_no_hook_configured_matches_none(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = make_rig(hooks=HookRunner([]))  # the daemon's runner when the config has no [hooks]
    seen: Counter[str] = Counter()
    _count(monkeypatch, HookRunner, "_snapshot", seen)
    _count(monkeypatch, HookRunner, "run", seen)
    out = rig.call("glob_files", {"pattern": "*"})
    assert not out.is_error, out.content
    # session 6 (EXEC2): not asked at all (was 4: PreToolUse, the exec start and end observations,
    # PostToolUse, each with its payload and correlation built to match nothing)
    assert seen["run"] == 0
    assert seen["_snapshot"] == 0  # was 4: the hook list copied under its lock to match nothing


def test_input_the_quick_check_does_not_accept_gets_the_full_validators_error(
    make_rig: Callable[..., Rig],
) -> None:
    rig = make_rig()
    out = rig.call("glob_files", {"pattern": ""})
    assert out.is_error and out.error_type == "invalid_tool_input"
    assert "invalid input at pattern: '' should be non-empty" in out.content["error"], out.content
    out = rig.call("glob_files", {"pattern": "*", "extra": 1})
    assert out.is_error and out.error_type == "invalid_tool_input"
    assert "Additional properties are not allowed" in out.content["error"], out.content


def test_a_sessions_plan_is_looked_up_without_the_lock() -> None:
    plans = PlanCache(capacity=2)
    a, b, c = (BoundToolPlan.build(builtin_specs()[i : i + 1]) for i in range(3))
    for plan in (a, b):
        plans.bind(plan)
    taken: Counter[str] = Counter()
    plans._lock = _CountedLock(plans._lock, taken, "lock")  # type: ignore[assignment]
    for _ in range(5):
        assert plans.get(b.content_hash, b.generation) is b
    assert taken["lock"] == 0  # was 5: the lock for every call's lookup
    assert plans.get(a.content_hash, a.generation) is a  # another plan: the LRU moves (under the lock)
    assert taken["lock"] == 1
    plans.bind(c)  # evicts b, the least recently used now
    assert plans.get(b.content_hash, b.generation) is None
    assert plans.get(c.content_hash, c.generation) is c
    assert plans.get(a.content_hash, a.generation + 1) is None  # the generation is part of the key


def _schema(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    kind = rng.choice(["string", "integer", "number", "boolean", "array", "object", "null", "multi"])
    s: dict[str, Any] = {"description": "d"} if rng.random() < 0.3 else {}
    if kind == "multi":
        s["type"] = rng.sample(["string", "integer", "null", "boolean"], 2)
    elif rng.random() < 0.9:
        s["type"] = kind
    if kind == "string":
        s.update(rng.choice([{}, {"minLength": rng.randint(0, 3)}, {"maxLength": rng.randint(0, 4)}]))
        if rng.random() < 0.2:
            s["enum"] = ["a", "bb", "ccc"]
    if kind in ("integer", "number"):
        s.update(rng.choice([{}, {"minimum": rng.randint(-2, 2)}, {"maximum": rng.randint(-2, 2)}]))
    if kind == "array" and depth < 2:
        s["items"] = _schema(rng, depth + 1)
        s.update(rng.choice([{}, {"minItems": 1}, {"maxItems": 2}]))
    if kind == "object" and depth < 2:
        names = rng.sample(["p", "q", "r"], rng.randint(0, 3))
        s["properties"] = {n: _schema(rng, depth + 1) for n in names}
        if names and rng.random() < 0.5:
            s["required"] = names[: rng.randint(1, len(names))]
        if rng.random() < 0.6:
            s["additionalProperties"] = rng.random() < 0.3
    return s


def _value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.randint(0, 11 if depth < 2 else 8)
    scalars: list[Any] = [None, True, False, 0, 1, -3, 2.5, 1.0, float("nan"), "", "a", "bb"]
    if pick <= 8:
        return rng.choice(scalars)
    if pick == 9:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["p", "q", "r", "s"]): _value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def test_the_quick_check_never_accepts_what_the_full_validator_refuses() -> None:
    rng = random.Random(34)
    accepted = refused_by_both = 0
    for _ in range(400):
        schema = _schema(rng)
        quick = compile_quick(schema)
        assert quick is not None, schema  # every keyword drawn is in the subset
        full = Draft202012Validator(schema)
        for _ in range(15):
            value = _value(rng)
            if quick(value):
                accepted += 1
                assert full.is_valid(value), (schema, value)
            elif not full.is_valid(value):
                refused_by_both += 1
    assert accepted > 1000 and refused_by_both > 1000  # both answers were exercised
    for spec in builtin_specs():  # every built-in tool's schema has a quick check
        assert compile_quick(spec.input_schema) is not None, spec.name
    others: list[dict[str, Any]] = [{"type": "string", "pattern": "x"}, {"anyOf": [{}]}, {"$ref": "#/x"}]
    for outside in [*others, {"format": "uri"}, {"minimum": 0.5}, {"additionalProperties": {}}]:
        assert compile_quick(outside) is None  # any other keyword: the full validator alone
    with pytest.raises(SchemaDenial, match="invalid input at n"):
        validate_input({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": 1.5})


def test_with_no_hook_a_call_builds_no_hook_payload(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Session 6 (EXEC2): an executor's HookRunner with no hook (the default) is not asked (was 4 runs a
    call: PreToolUse, two observations, PostToolUse, each with its payload and correlation built); with a
    hook it is asked as before."""
    seen: Counter[str] = Counter()
    _count(monkeypatch, HookRunner, "run", seen)
    rig = make_rig(hooks=HookRunner())
    assert not rig.call("glob_files", {"pattern": "*.txt"}).is_error
    assert seen["run"] == 0
    runner = HookRunner()
    told: list[str] = []
    runner.register("PostToolUse", lambda event, payload, corr: told.append(payload["tool_name"]) or {})
    rig = make_rig(hooks=runner)
    assert not rig.call("glob_files", {"pattern": "*.txt"}).is_error
    assert told == ["glob_files"] and seen["run"] == 4
