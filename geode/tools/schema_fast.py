"""A quick yes for tool input that plainly matches its schema, before the full JSON Schema validator.

``compile_quick(schema)`` turns a schema written in the small subset the built-in tools use (``type``,
``properties``, ``required``, ``additionalProperties: false``, string lengths, number bounds, string
``enum``, ``items`` and array lengths; annotations such as ``description``) into a predicate that answers
True only when the input certainly matches. It is conservative: a schema with any other keyword gets no
predicate (None), and any doubt (a float where an integer is asked, a bool, a tuple...) answers False, after
which the full validator (``geode.tools.schema_check``) decides and words the error. So a True here is never
a call the full validator refuses; the full validator still runs on everything this does not accept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Quick = Callable[[Any], bool]
ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment", "deprecated"})
SIMPLE_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda x: type(x) is str,
    "integer": lambda x: type(x) is int,
    "number": lambda x: type(x) is int or type(x) is float,
    "boolean": lambda x: type(x) is bool,
    "null": lambda x: x is None,
    "object": lambda x: type(x) is dict,
    "array": lambda x: type(x) is list,
}


class _Unsupported(Exception):
    """A keyword or value outside the subset: no quick predicate for this schema."""


def compile_quick(schema: Any) -> Quick | None:
    """The predicate of ``schema`` (see the module), or None when it uses anything outside the subset."""
    try:
        return _compile(schema, 0)
    except _Unsupported:
        return None


def _compile(schema: Any, depth: int) -> Quick:
    if type(schema) is not dict or depth > 16:
        raise _Unsupported
    checks: list[Quick] = []
    for key, value in schema.items():
        if key in ANNOTATIONS:
            continue
        make = _KEYWORDS.get(key)
        if make is None:
            raise _Unsupported
        checks.append(make(value, schema, depth))
    checks = [c for c in checks if c is not _ANY]
    if not checks:
        return _ANY
    if len(checks) == 1:
        return checks[0]
    return lambda x: all(c(x) for c in checks)


def _ANY(x: Any) -> bool:
    return True


def _type(value: Any, schema: dict[str, Any], depth: int) -> Quick:
    names = value if type(value) is list else [value]
    if not names or any(type(n) is not str or n not in SIMPLE_TYPES for n in names):
        raise _Unsupported
    tests = [SIMPLE_TYPES[n] for n in names]
    if len(tests) == 1:
        return tests[0]
    return lambda x: any(t(x) for t in tests)


def _properties(value: Any, schema: dict[str, Any], depth: int) -> Quick:
    if type(value) is not dict:
        raise _Unsupported
    subs = {name: _compile(sub, depth + 1) for name, sub in value.items()}
    closed = schema.get("additionalProperties", True)
    if closed not in (True, False):  # a schema for the other properties: not in the subset
        raise _Unsupported

    def check(x: Any) -> bool:
        if type(x) is not dict:
            return True  # properties applies to objects only (``type`` says the rest)
        for name, item in x.items():
            sub = subs.get(name)
            if sub is None:
                if closed is False:
                    return False
            elif not sub(item):
                return False
        return True

    return check


def _additional(value: Any, schema: dict[str, Any], depth: int) -> Quick:
    if type(value) is not bool:
        raise _Unsupported
    if value is True or "properties" in schema:  # ``properties`` checks the names it does not list
        return _ANY
    return lambda x: type(x) is not dict or not x


def _required(value: Any, schema: dict[str, Any], depth: int) -> Quick:
    if type(value) is not list or any(type(n) is not str for n in value):
        raise _Unsupported
    names = tuple(value)
    return lambda x: type(x) is not dict or all(n in x for n in names)


def _bound(kind: str) -> Callable[[Any, dict[str, Any], int], Quick]:
    def make(value: Any, schema: dict[str, Any], depth: int) -> Quick:
        if type(value) is not int:
            raise _Unsupported
        if kind == "minLength":
            return lambda x: type(x) is not str or len(x) >= value
        if kind == "maxLength":
            return lambda x: type(x) is not str or len(x) <= value
        if kind == "minItems":
            return lambda x: type(x) is not list or len(x) >= value
        if kind == "maxItems":
            return lambda x: type(x) is not list or len(x) <= value
        # a float is left to the full validator (False); the bounds do not apply to anything else
        if kind == "minimum":
            return lambda x: x >= value if type(x) is int else type(x) is not float
        return lambda x: x <= value if type(x) is int else type(x) is not float  # maximum

    return make


def _enum(value: Any, schema: dict[str, Any], depth: int) -> Quick:
    if type(value) is not list or any(type(v) is not str for v in value):
        raise _Unsupported
    allowed = frozenset(value)
    return lambda x: type(x) is str and x in allowed


def _items(value: Any, schema: dict[str, Any], depth: int) -> Quick:
    sub = _compile(value, depth + 1)
    return lambda x: type(x) is not list or all(sub(i) for i in x)


_KEYWORDS: dict[str, Callable[[Any, dict[str, Any], int], Quick]] = {
    "type": _type,
    "properties": _properties,
    "additionalProperties": _additional,
    "required": _required,
    "minLength": _bound("minLength"),
    "maxLength": _bound("maxLength"),
    "minItems": _bound("minItems"),
    "maxItems": _bound("maxItems"),
    "minimum": _bound("minimum"),
    "maximum": _bound("maximum"),
    "enum": _enum,
    "items": _items,
}
