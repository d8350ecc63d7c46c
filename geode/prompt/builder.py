"""Build the system prompt of one turn as sections, with one cache boundary after the stable part."""

from __future__ import annotations

import datetime as dt
from typing import Any

from geode.prompt.sources import PromptSources, geode_md_sections, rule_files, sources_stamp
from geode.providers.types import SystemSection
from geode.skills.prompt_block import available_skills

IDENTITY_ORDER = ("Identity", "Voice & Conduct", "Operating Principles", "RUNTIME CANNOT")

TOOL_CONTRACT = (
    "Use the tools listed for this step when they help. Each tool result arrives as a tool_result; results, "
    "denials and errors are all information. When the work is done, answer in text without calling tools."
)


def _tag(name: str, body: str) -> str:
    return f"<{name}>\n{body}\n</{name}>"


def build_system_prompt(
    sources: PromptSources,
    *,
    model: str = "",
    provider: str = "",
    hints: dict[str, str] | None = None,
    today: dt.date | None = None,
) -> tuple[SystemSection, ...]:
    """Stable part (GEODE.md sections, rules, tool contract) then a dynamic part (model, date, directives,
    per-turn hints such as a verification continuation or the execution budget).

    Built for every model call of a turn: the stable part is built again only when a source file's stamp
    (inode, mtime, size), the skills or the memory changed, and an unchanged dynamic part is the same
    section as last time (the very same objects each round: what is derived from them is reused)."""
    date = (today or dt.date.today()).isoformat()
    items = tuple((k, v) for k, v in (hints or {}).items() if v)
    dyn_key = (model, provider, date, tuple(sources.directives), items)
    dynamic = _DYNAMIC.get(dyn_key)
    if dynamic is None:
        dynamic = _dynamic(model, provider, date, sources.directives, items)
        _remember(_DYNAMIC, dyn_key, dynamic)
    return (*_stable(sources), dynamic)


_MEMO_LIMIT = 64
_STABLE: dict[tuple[object, ...], tuple[SystemSection, ...]] = {}
_DYNAMIC: dict[tuple[object, ...], SystemSection] = {}


def _remember(memo: dict[tuple[object, ...], Any], key: tuple[object, ...], value: Any) -> None:
    if len(memo) >= _MEMO_LIMIT:
        memo.clear()
    memo[key] = value


def _stable(sources: PromptSources) -> tuple[SystemSection, ...]:
    stamp = sources_stamp(sources.workspace, sources.home_rules, sources.default_geode_md)
    skills = tuple((str(n), str(d)) for n, d in sources.skills)
    key = (sources.default_geode_md, sources.workspace, sources.home_rules, stamp, skills, sources.memory)
    kept = _STABLE.get(key)
    if kept is not None:
        return kept
    md = geode_md_sections(sources.workspace, sources.default_geode_md)
    ordered = [k for k in IDENTITY_ORDER if k in md] + [k for k in md if k not in IDENTITY_ORDER]
    stable: list[SystemSection] = []
    if ordered:
        body = "\n\n".join(f"## {k}\n{md[k]}" for k in ordered)
        stable.append(SystemSection(name="agent_identity", text=_tag("agent_identity", body)))
    rules = rule_files(sources.home_rules, sources.workspace)
    if rules:
        body = "\n\n".join(f"### {r.name} ({r.scope})\n{r.text}" for r in rules)
        stable.append(SystemSection(name="runtime_rules", text=_tag("runtime_rules", body)))
    if sources.skills:  # names and descriptions only: a skill's body loads through use_skill
        stable.append(SystemSection(name="available_skills", text=available_skills(sources.skills)))
    if sources.memory:  # the scope's MEMORY.md notes, marked as the agent's data (geode/memory/)
        stable.append(SystemSection(name="agent_memory", text=sources.memory))
    stable.append(SystemSection(name="tool_contract", text=TOOL_CONTRACT, cache_boundary=True))
    out = tuple(stable)
    _remember(_STABLE, key, out)
    return out


def _dynamic(
    model: str, provider: str, date: str, directives: list[str], hints: tuple[tuple[str, str], ...]
) -> SystemSection:
    dynamic: list[str] = []
    if model:
        dynamic.append(_tag("model_card", f"model: {model}\nprovider: {provider}"))
    dynamic.append(_tag("current_date", date))
    if directives:
        dynamic.append(_tag("session_directives", "\n".join(directives)))
    for name, text in hints:
        dynamic.append(_tag(name, text))
    return SystemSection(name="dynamic_context", text=_tag("dynamic_context", "\n".join(dynamic)))


def system_text(sections: tuple[SystemSection, ...]) -> str:
    return "\n\n".join(s.text for s in sections)
