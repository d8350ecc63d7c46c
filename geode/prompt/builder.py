"""Build the system prompt of one turn as sections, with one cache boundary after the stable part."""

from __future__ import annotations

import datetime as dt

from geode.prompt.sources import PromptSources, geode_md_sections, rule_files
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
    per-turn hints such as a verification continuation or the execution budget)."""
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
    stable.append(SystemSection(name="tool_contract", text=TOOL_CONTRACT))
    stable[-1] = stable[-1].model_copy(update={"cache_boundary": True})

    dynamic: list[str] = []
    if model:
        dynamic.append(_tag("model_card", f"model: {model}\nprovider: {provider}"))
    dynamic.append(_tag("current_date", (today or dt.date.today()).isoformat()))
    if sources.directives:
        dynamic.append(_tag("session_directives", "\n".join(sources.directives)))
    for name, text in (hints or {}).items():
        if text:
            dynamic.append(_tag(name, text))
    return (*stable, SystemSection(name="dynamic_context", text=_tag("dynamic_context", "\n".join(dynamic))))


def system_text(sections: tuple[SystemSection, ...]) -> str:
    return "\n\n".join(s.text for s in sections)
