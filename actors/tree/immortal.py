"""Code objects made immortal before a fork (CPython 3.12), so a forked child's calls do not copy the pages
its parent's functions, classes and constants sit on.

Every call of a Python function writes the reference counts of its function and code object (the frame
holds both), every ``LOAD_GLOBAL`` / ``LOAD_CONST`` / attribute load of a class or a constant writes that
object's count, and a class's first method-cache lookup after it changed writes its version tag. In a forked
child each such write copies the 4 KiB page the object shares with the zygote: a loop worker's ``[heap]``
alone held ~0.4 MiB of copied class pages and ~0.7 MiB of code pages (pages compared with the zygote's
through ``/proc/<pid>/pagemap``; bench_MEM11.md). PEP 683 (3.12) made an object whose count is
``_Py_IMMORTAL_REFCNT`` immortal: ``Py_INCREF`` and ``Py_DECREF`` leave it unwritten. :func:`immortalize`
gives that count to the objects a program's code is made of -- classes, functions, code objects and their
constants, modules, descriptors -- in the parent before it forks (the daemon before the zygote, the zygote
after each import phase), and looks each class up once so that its version tag is set there, not in every
child. Those objects live as long as the process anyway (nothing unloads a module); an immortal one is never
freed (a function replaced later stays: bounded by what exists at the fork). Objects with state that
changes (instances, dicts, lists, sockets, files) are left alone. 3.12 only (3.11 has no immortal objects;
3.13 changes their representation); ``GEODE_IMMORTALIZE=0``: off (to compare).
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import types

IMMORTAL_REFCNT = 0xFFFFFFFF  # _Py_IMMORTAL_REFCNT on a 64-bit CPython 3.12
ENV = "GEODE_IMMORTALIZE"
_CODE_KINDS = frozenset(
    {
        types.FunctionType,
        types.ModuleType,
        types.BuiltinFunctionType,
        types.MethodDescriptorType,
        types.WrapperDescriptorType,
        types.GetSetDescriptorType,
        types.MemberDescriptorType,
        types.ClassMethodDescriptorType,
        property,
        classmethod,
        staticmethod,
    }
)
_OWNERS = (types.ModuleType, type, type(None))  # a builtin function's __self__: no object (bound methods)
_BUILTIN = types.BuiltinFunctionType
_CONSTANTS = frozenset({str, bytes, int, float, complex, tuple, frozenset})


def enabled() -> bool:
    return sys.version_info[:2] == (3, 12) and os.environ.get(ENV, "1") != "0"


def _code(code: types.CodeType, out: list[object], seen: set[int]) -> None:
    """A code object (not tracked by the GC: reached through its function), its constants, nested code."""
    if id(code) in seen:
        return
    seen.add(id(code))
    out.append(code)
    _constants(code.co_consts, out, seen)


def _constants(values: tuple[object, ...] | frozenset[object], out: list[object], seen: set[int]) -> None:
    for value in values:
        kind = type(value)
        if kind in _CONSTANTS:
            out.append(value)
            if kind is tuple or kind is frozenset:
                _constants(value, out, seen)  # type: ignore[arg-type]
        elif kind is types.CodeType:
            _code(value, out, seen)  # type: ignore[arg-type]


def _write(objs: list[object]) -> None:
    """Each object's reference count set to IMMORTAL_REFCNT (one immortal already, e.g. an interned string or
    a small int, is not written: ``sys.getrefcount`` is cheaper than a ctypes view)."""
    count, at = sys.getrefcount, ctypes.c_ssize_t.from_address
    for obj in [o for o in objs if count(o) < IMMORTAL_REFCNT]:
        at(id(obj)).value = IMMORTAL_REFCNT


def immortalize() -> int:
    """Make the code objects (classes, functions, their code and constants, modules) immortal; call after
    ``gc.collect()`` and before ``gc.freeze()`` (the frozen generation is not listed). Returns how many."""
    if not enabled():
        return 0
    objs = gc.get_objects()
    kinds, owners = _CODE_KINDS, _OWNERS
    marked = [o for o in objs if type(o) in kinds]
    # a bound C method (sock.send) made immortal would keep its object (and its fd) for good
    marked = [o for o in marked if type(o) is not _BUILTIN or isinstance(o.__self__, owners)]  # type: ignore[attr-defined]
    seen: set[int] = set()
    for function in [o for o in marked if type(o) is types.FunctionType]:
        _code(function.__code__, marked, seen)  # type: ignore[attr-defined]
    classes = [o for o in objs if isinstance(o, type)]
    del objs
    for cls in classes:
        try:  # a method-cache lookup (no metaclass __getattr__): the version tag set here, not in a child
            type.__getattribute__(cls, "__init__")
        except Exception:  # a class whose lookup fails: left as it is
            pass
    marked += classes
    _write(marked)
    return len(marked)


__all__ = ["ENV", "enabled", "immortalize"]
