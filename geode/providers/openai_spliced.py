"""The OpenAI adapters' request bodies with the conversation and the tools spliced in already encoded.

Chat Completions and Responses project one conversation message to zero or more wire items (a tool result
per ``tool`` message, a text and a call per item, …). :class:`SplicedWire` keeps, per adapter, each
message's items encoded once per message object (:class:`~geode.providers.encoded_history.EncodedHistory`:
a round's request reuses the last request's encoded messages and encodes only its new ones) and a plan's
tool params encoded once per schema object; the adapter's ``wire_body`` puts them in the body as
:class:`~geode.providers.adapter_base.Joined` and ``Encoded`` lists, which encode to the JSON its
``build_body`` describes.
A message with a picture is projected on every request (its file is read and verified each time).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from geode.providers.adapter_base import Encoded, Joined
from geode.providers.encoded_history import Encode, EncodedHistory
from geode.providers.identity_memo import IdentityMemo, common_prefix
from geode.providers.types import ModelRequest, ToolSchema


def dumps(value: Any) -> bytes:
    """``value`` as the body encoder writes it (UTF-8 JSON, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False).encode()


def items_json(items: Iterable[dict[str, Any]]) -> bytes:
    """A message's wire items encoded and joined as array items (``b""`` when it projects to none)."""
    return b", ".join(dumps(i) for i in items)


class SplicedWire:
    """One adapter's encoded history (per conversation) and encoded tool params (per schema object)."""

    def __init__(self, encode: Encode, tool_param: Callable[[ToolSchema], dict[str, Any]]) -> None:
        self.history = EncodedHistory(encode)
        self._tool_param = tool_param
        self._tool_memo: IdentityMemo[bytes] = IdentityMemo()
        self._tools: tuple[tuple[ToolSchema, ...], list[bytes]] = ((), [])  # the last request's, encoded

    def messages(self, request: ModelRequest, with_pictures: Encode, lead: Sequence[bytes] = ()) -> Joined:
        """``lead`` (e.g. the system message) then every message's items, in order."""
        key = request.metadata.get("session_id", "")
        joined = self.history.joined(key, request.messages, with_pictures)
        lead = [i for i in lead if i]
        if not lead:
            return Joined(joined)
        return Joined([b", ".join(lead), *((b", ", *joined) if joined else ())])

    def tools(self, tools: tuple[ToolSchema, ...]) -> Encoded:
        last, encoded = self._tools
        if len(last) != len(tools) or common_prefix(last, tools) < len(tools):  # same schemas: compared in C
            encoded = [self._tool_memo.get(t, self._tool_json) for t in tools]
            self._tools = (tools, encoded)
        return Encoded(encoded)

    def _tool_json(self, tool: ToolSchema) -> bytes:
        return dumps(self._tool_param(tool))


def replaced_by_extra_body(options: dict[str, Any], spliced: set[str]) -> bool:
    """True when the endpoint's ``extra_body`` sets a key that would be spliced (it replaces it: the body is
    then built whole, as ``build_body`` does)."""
    return bool(spliced & set(options.get("extra_body") or {}))


def without_history(request: ModelRequest) -> ModelRequest:
    """The request with no messages and no tools (what ``build_body`` builds the rest of the body from)."""
    return request.model_copy(update={"messages": (), "tools": ()})
