"""A skill folder laid out like a public Claude Code skill (front matter with name, description,
allowed-tools and license; a ``scripts/`` folder; a reference file), written by the tests themselves."""

from __future__ import annotations

from pathlib import Path

NAME = "pdf-forms"
DESCRIPTION = "Fill PDF forms from a field list. Use when the user asks to fill in a form."
REFERENCE = "FIELD-REFERENCE-7c1e: every field name is upper case"
INSTRUCTIONS = "# PDF forms\n\nRead reference.md first, then run scripts/fill.sh with the output file."
SKILL_MD = f"""---
name: {NAME}
description: {DESCRIPTION}
allowed-tools: Read, Grep, Glob, Bash(bash scripts/fill.sh:*)
license: Apache-2.0
metadata:
  version: "1.2"
---
{INSTRUCTIONS}
"""
FILL_SH = '#!/bin/sh\necho "FILLED $1"\necho filled > "$1"\n'


def write_skill(skills_dir: Path) -> Path:
    """The skill under ``skills_dir`` (``<dir>/pdf-forms``); returns its folder."""
    folder = skills_dir / NAME
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    (folder / "reference.md").write_text(REFERENCE + "\n")
    (folder / "scripts" / "fill.sh").write_text(FILL_SH)
    (folder / "scripts" / "fill.sh").chmod(0o755)
    return folder


def write_broken(skills_dir: Path, name: str = "broken") -> Path:
    folder = skills_dir / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: broken\ndescription: [unclosed\n---\nbody\n")
    return folder
