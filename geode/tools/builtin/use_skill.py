"""``use_skill``: load one skill's instructions on use (read-only). The result carries the instructions (the
body of its ``SKILL.md``), its folder and the list of its files; from the next step on the skill is in use
(geode/loop/skills_in_use.py): its files are readable by the read-only file tools, relative paths resolved
from its folder, and its ``allowed-tools`` narrow the session's tools (geode/tools/skill_scope.py). Scripts
are not run here: the model runs them with run_bash, under the normal approvals."""

from __future__ import annotations

from typing import Any

from geode.skills.catalogue import geode_tool_names, skill_files
from geode.tools.handlers import ToolEnv, ToolFailure
from geode.tools.skill_scope import SkillSource


def use_skill(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    source = env.service("skills")
    if not isinstance(source, SkillSource):
        raise ToolFailure("skills are not available in this process", "tool_unavailable")
    name = str(args["name"]).strip()
    cat = source.catalogue(env.workspace)
    skill = cat.get(name)
    if skill is None:
        known = ", ".join(s.name for s in cat.skills) or "none"
        failed = next((f for f in cat.failures if f.folder.name == name), None)
        why = f" (its folder did not load: {failed.reason})" if failed is not None else ""
        raise ToolFailure(f"no skill named {name!r}{why}; available: {known}", "skill_not_found")
    out: dict[str, Any] = {
        "skill": skill.name,
        "folder": str(skill.folder),
        "source": skill.source,
        "instructions": skill.body,
        "files": skill_files(skill),
        "note": (
            "The skill is in use from your next step: read its files with read_file (paths relative to its "
            "folder work); run its scripts with run_bash (a person approves them as usual)."
        ),
    }
    if skill.allowed_tools is not None:
        allowed = sorted(geode_tool_names(skill.allowed_tools) | {"use_skill"})
        out["allowed_tools"] = allowed
        out["note"] += " While it is in use only these tools are allowed: " + ", ".join(allowed) + "."
    return out
