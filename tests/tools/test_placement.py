"""Placement of tool calls on remote executors (geode/tools/placement.py): the longest declared root holding
the session's workspace wins, lost executors' roots are "down", heartbeats and incarnations."""

from __future__ import annotations

import pytest

from geode.tools.placement import Placement, is_under, norm_root


def _reg(p: Placement, host: str, roots: list[str], *, inc: int = 1, now: float = 0.0) -> object:
    return p.register(host=host, name="executor", incarnation=inc, roots=roots, peer=f"{host}#{inc}", now=now)


def test_longest_root_wins_and_everything_else_is_local() -> None:
    p = Placement()
    _reg(p, "w1", ["/srv/work"])
    _reg(p, "w2", ["/srv/work/big", "/data"])
    assert p.route("/srv/work/a/b").remote.host == "w1"  # type: ignore[union-attr]
    assert p.route("/srv/work").remote.host == "w1"  # type: ignore[union-attr]
    big = p.route("/srv/work/big/x")
    assert big.kind == "remote" and big.remote is not None and big.remote.host == "w2"
    assert big.root == "/srv/work/big"
    assert p.route("/data/../srv/work/big").remote.host == "w2"  # type: ignore[union-attr]
    assert p.route("/srv/workshop").kind == "local"  # a prefix of the name is not a parent directory
    assert p.route("/home/me").kind == "local"
    assert p.route("").kind == "local" and p.route("relative/ws").kind == "local"


def test_a_silent_executor_is_lost_its_roots_are_down_until_it_registers_again() -> None:
    p = Placement(liveness_s=3.0)
    _reg(p, "w1", ["/srv/w1"], now=0.0)
    assert p.heartbeat("w1", "executor", 1, now=2.0)
    assert p.expire(now=4.9) == []  # heard 2.9 s ago
    lost = p.expire(now=5.1)
    assert [(rx.host, rx.incarnation) for rx in lost] == [("w1", 1)]
    assert p.expire(now=9.0) == []  # declared once
    assert p.route("/srv/w1/x").kind == "down"
    assert not p.heartbeat("w1", "executor", 1, now=5.2)  # lost: it must leave and come back anew
    assert _reg(p, "w1", ["/srv/w1"], inc=2, now=6.0) is None  # nothing up to replace
    route = p.route("/srv/w1/x")
    assert route.kind == "remote" and route.remote is not None and route.remote.incarnation == 2


def test_a_new_incarnation_replaces_the_live_one_which_is_returned_as_dead() -> None:
    p = Placement()
    assert _reg(p, "w1", ["/a"], inc=1) is None
    assert _reg(p, "w1", ["/a"], inc=1) is None  # the same incarnation again: a refresh
    old = _reg(p, "w1", ["/a", "/b"], inc=2)
    assert old is not None and old.incarnation == 1 and old.owner_name == "w1/executor"  # type: ignore[attr-defined]
    assert not p.heartbeat("w1", "executor", 1, now=1.0)
    assert p.heartbeat("w1", "executor", 2, now=1.0)
    assert p.route("/b/c").remote.incarnation == 2  # type: ignore[union-attr]


def test_in_flight_counts_follow_the_incarnation() -> None:
    p = Placement()
    _reg(p, "w1", ["/a"])
    rx = p.route("/a").remote
    assert rx is not None
    p.started(rx)
    p.started(rx)
    p.finished(rx)
    assert [r.in_flight for r in p.all()] == [1]
    p.expire(now=100.0)
    assert [(r.up, r.in_flight) for r in p.all()] == [(False, 0)]


def test_roots_are_absolute_and_compared_lexically() -> None:
    with pytest.raises(ValueError, match="absolute"):
        norm_root("srv/w")
    assert norm_root("/srv//w/./x/") == "/srv/w/x"
    assert is_under("/srv/w/x", "/srv/w") and is_under("/srv/w", "/srv/w") and is_under("/x", "/")
    assert not is_under("/srv/wx", "/srv/w")
    p = Placement()
    with pytest.raises(ValueError):
        _reg(p, "w1", ["relative"])
