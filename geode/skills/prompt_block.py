"""The ``<available_skills>`` block of the system prompt: each usable skill's name and description (the
bodies load on use, through ``use_skill``). Descriptions are the skill authors' words: data that says when a
skill fits, not instructions from the operator."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

INTRO = (
    "Skills are folders of instructions (and sometimes scripts and reference files) for particular tasks. "
    "When a task matches a skill's description, call use_skill with its name before starting; its "
    "instructions and files load then."
)


def available_skills(skills: Sequence[tuple[str, str]]) -> str:
    """``<available_skills>`` with one ``<skill>`` per ``(name, description)``; empty when there is none."""
    if not skills:
        return ""
    rows = "\n".join(
        f"<skill><name>{_esc(n)}</name><description>{_esc(d)}</description></skill>" for n, d in skills
    )
    return f"<available_skills>\n{INTRO}\n{rows}\n</available_skills>"


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def skill_cards(home_root: Path, workspace: Path | None, trusted: Sequence[str]) -> list[tuple[str, str]]:
    """``(name, description)`` of each usable skill of the home and the (trusted) project workspace."""
    from geode.skills.catalogue import discover

    return [(s.name, s.description) for s in discover(home_root, workspace, trusted).skills]
