"""actors/tree/immortal.py: before a fork the parent's classes, functions, code objects (and their constants)
and modules become immortal (CPython 3.12), so a forked child's calls write no reference count into the pages
it shares; objects with state (instances, sockets and their bound methods, lists) are left alone. Run in a
subprocess: immortal objects are never freed, which the test process must not inherit."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 12), reason="3.12's immortal objects")

_PROBE = """
import gc, os, socket, sys
from actors.tree import immortal

IMMORTAL = immortal.IMMORTAL_REFCNT

class Shape:
    def area(self):
        return "a constant, not an identifier"

def helper(n):
    return n + 1

sock = socket.socket()
send = sock.send  # a bound C method: immortal, it would keep the socket for good
shape, items = Shape(), [1, 2, 3]
gc.collect()
n = immortal.immortalize()
const = Shape.area.__code__.co_consts[-1]
before = sys.getrefcount(helper), sys.getrefcount(Shape)
for i in range(1000):
    helper(i), Shape().area()
print("MARKED", n)
code = (helper, helper.__code__, Shape, Shape.area, const, os)
print("IMMORTAL", [sys.getrefcount(o) == IMMORTAL for o in code])
print("UNCHANGED", before == (sys.getrefcount(helper), sys.getrefcount(Shape)))
print("MORTAL", [sys.getrefcount(o) < IMMORTAL for o in (shape, items, sock, send)])
"""


def _run(**env: str) -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, **env},
    ).stdout
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def test_code_objects_are_immortal_and_stateful_objects_are_not() -> None:
    got = _run(GEODE_IMMORTALIZE="1")
    assert int(got["MARKED"]) > 1000
    assert got["IMMORTAL"] == str([True] * 6)  # before: counts that every call or instance wrote
    assert got["UNCHANGED"] == "True"
    assert got["MORTAL"] == str([True] * 4)


def test_off_by_the_environment() -> None:
    got = _run(GEODE_IMMORTALIZE="0")
    assert got["MARKED"] == "0" and got["IMMORTAL"] == str([False] * 6)
