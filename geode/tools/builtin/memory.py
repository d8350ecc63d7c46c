"""``memory_save`` and ``memory_search``: the agent's notes in the MEMORY.md of the calling session's scope
(``ctx.scope``, set by the loop from the session, never by the model). ``memory_save`` is a mutation:
receipted by the executor like every mutating built-in and, in a chat, approved there; ``memory_search`` only
reads."""

from __future__ import annotations

from typing import Any

from geode.memory.files import MemoryFiles, MemoryRefused
from geode.memory.prompt_block import trusted_workspace
from geode.memory.scopes import ScopeError
from geode.tools.handlers import ToolEnv, ToolFailure

MAX_HITS = 50


def _files(env: ToolEnv) -> MemoryFiles:
    files = env.service("memory")
    if not isinstance(files, MemoryFiles):
        raise ToolFailure("memory is not available in this executor", "tool_unavailable")
    return files


def memory_save(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    files = _files(env)
    action = str(args.get("action") or "")
    match = args.get("match")
    try:
        out = files.save(env.ctx.scope, action, str(args.get("text") or ""), str(match) if match else None)
    except (MemoryRefused, ScopeError) as exc:
        raise ToolFailure(str(exc), getattr(exc, "error_type", "invalid_input")) from None
    return {**out, "scope": env.ctx.scope}


def memory_search(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    files = _files(env)
    trusted = trusted_workspace(env.ctx.workspace, files.projects)
    try:
        hits = files.search(
            env.ctx.scope, str(args.get("query") or ""), workspace=env.ctx.workspace, trusted=trusted
        )
    except (MemoryRefused, ScopeError) as exc:
        raise ToolFailure(str(exc), getattr(exc, "error_type", "invalid_input")) from None
    return {"scope": env.ctx.scope, "matches": hits[:MAX_HITS], "total": len(hits)}
