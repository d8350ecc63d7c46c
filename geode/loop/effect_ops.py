"""The operation ids an assistant tool batch carries (``metadata.effect_operations``): one per call it runs;
and the calls it refused for a lone surrogate in their arguments (``metadata.not_unicode``: id, where).

Written as a list of ``{tool_use_id, operation_id, step_id}`` rows, not as a map keyed by tool_use id:
msgpack's unpacker interns every map key it reads and CPython 3.12's interned strings are immortal, so each
tool call's id stayed for good in the store and in every process that read the message (the soak's store:
one ~110-byte string a tool call, never freed). Read in both shapes: records written before keep the map.
``not_unicode`` likewise: ``{tool_use_id, where}`` rows, read in both shapes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

KEY = "effect_operations"
NOT_UNICODE = "not_unicode"


def effect_rows(ops: Iterable[tuple[str, str, str]]) -> list[dict[str, str]]:
    """The metadata value of ``(tool_use_id, operation_id, step_id)`` triples, in the batch's order."""
    return [{"tool_use_id": t, "operation_id": op, "step_id": step} for t, op, step in ops]


def effect_operations(metadata: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """tool_use id -> its ``{operation_id, step_id}`` row in a message's metadata (either shape)."""
    raw = metadata.get(KEY)
    if isinstance(raw, Mapping):
        return {str(k): v for k, v in raw.items() if isinstance(v, Mapping)}
    if isinstance(raw, (list, tuple)):
        return {
            str(row["tool_use_id"]): row
            for row in raw
            if isinstance(row, Mapping) and "tool_use_id" in row and "operation_id" in row
        }
    return {}


def not_unicode_rows(refused: Mapping[str, str]) -> list[dict[str, str]]:
    """The metadata value of the refused calls (tool_use id -> where its arguments had a lone surrogate)."""
    return [{"tool_use_id": t, "where": where} for t, where in refused.items()]


def not_unicode_calls(metadata: Mapping[str, Any]) -> dict[str, str]:
    """tool_use id -> where, of the calls a batch refused for a lone surrogate (either shape)."""
    raw = metadata.get(NOT_UNICODE)
    if isinstance(raw, Mapping):
        return {str(k): str(v) for k, v in raw.items()}
    if isinstance(raw, (list, tuple)):
        return {
            str(row["tool_use_id"]): str(row.get("where", ""))
            for row in raw
            if isinstance(row, Mapping) and "tool_use_id" in row
        }
    return {}
