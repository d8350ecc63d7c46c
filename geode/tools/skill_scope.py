"""What the skills in use by a session change for one call (the executor's side of ``use_skill``).

The loop names the skills in use in ``ToolContext.skills`` (those whose ``use_skill`` call succeeded in the
session's history); the executor finds each again by name in the home and the trusted project
(:class:`SkillSource`), never taking a path from the context. While a skill is in use:

- its folder is an extra allowed root for the read-only file tools (read_file, list_dir, glob_files,
  grep_files), carved out of the GEODE home's exclusion; never for a tool that writes, sends or runs;
- a relative path that names nothing in the workspace but a file in a skill's folder is resolved there
  (the skill used last first);
- its ``allowed-tools`` can only narrow: a tool outside every in-use skill's list (``use_skill`` itself
  aside) is refused (``tool_policy_denied``, ``reason: skill_allowed_tools``); it never grants a tool, a
  permission or an approval.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from geode.skills.catalogue import SkillCatalogue, discover, geode_tool_names
from geode.tools.paths import AllowedRoots, Exclusion
from geode.tools.spec import EffectClass, ToolCall, ToolContext, ToolSpec

USE_SKILL = "use_skill"


@dataclass(frozen=True)
class SkillSource:
    """Where skills come from for the executor: the home (``None``: none) and the trusted projects."""

    home: Path | None
    trusted: tuple[str, ...] = ()

    def catalogue(self, workspace: Path | None) -> SkillCatalogue:
        return discover(self.home, workspace, self.trusted)


@dataclass(frozen=True)
class SkillScope:
    """The in-use skills' folders (resolved, the one used last first) and the tools they leave (None: all)."""

    folders: tuple[Path, ...] = ()
    allowed: frozenset[str] | None = None

    def refusal(self, tool: str) -> str | None:
        if self.allowed is None or tool == USE_SKILL or tool in self.allowed:
            return None
        names = ", ".join(sorted(self.allowed - {USE_SKILL})) or "none"
        return (
            f"Tool '{tool}' is not in the allowed-tools of the skill in use (allowed while it is in use: "
            f"{names})."
        )


NONE = SkillScope()


def scope_of(ctx: ToolContext, source: SkillSource | None, workspace: Path) -> SkillScope:
    """The scope of the skills ``ctx`` names (a skill no longer found adds nothing)."""
    if not ctx.skills or source is None:
        return NONE
    cat = source.catalogue(workspace)
    skills = [s for s in (cat.get(n) for n in reversed(ctx.skills)) if s is not None]
    folders = tuple(dict.fromkeys(Path(os.path.realpath(s.folder)) for s in skills))
    lists = [geode_tool_names(s.allowed_tools) for s in skills if s.allowed_tools is not None]
    allowed = frozenset.intersection(*lists) | {USE_SKILL} if lists else None
    return SkillScope(folders, allowed)


def reads_files(spec: ToolSpec | None) -> bool:
    return spec is not None and spec.policy.effect is EffectClass.READ


def with_skill_roots(roots: AllowedRoots, scope: SkillScope) -> AllowedRoots:
    """``roots`` plus the skill folders, each carved out of the home exclusion it lies in (read-only)."""
    if not scope.folders:
        return roots
    ex = roots.excluded
    carved = Exclusion.carving(ex.paths, (*ex.carve_outs, *scope.folders))
    return AllowedRoots.resolved((*roots, *scope.folders), replace(carved, home=ex.home))  # all real


def skill_relative(
    call: ToolCall, path_args: tuple[str, ...], workspace: Path, scope: SkillScope
) -> ToolCall:
    """``call`` with each relative path argument that names nothing in the workspace but exists in an in-use
    skill's folder made absolute there; unchanged otherwise."""
    if not scope.folders:
        return call
    args: dict[str, Any] = dict(call.input)
    for key in path_args:
        raw = args.get(key)
        if not isinstance(raw, str) or not raw or raw.startswith(("/", "~")) or "\x00" in raw:
            continue
        if os.path.lexists(workspace / raw):
            continue
        for folder in scope.folders:
            if os.path.lexists(folder / raw):
                args[key] = str(folder / raw)
                break
    return call if args == call.input else call.model_copy(update={"input": args})
