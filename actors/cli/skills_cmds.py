"""`geode skills [--json] [--workspace DIR]`: the skills a session in DIR (default: the current directory)
would be offered — the home's ``skills/`` and, for a trusted project, its ``.geode/skills/`` — with the
folders that failed to parse and why. Read from the files directly: no daemon needed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer

EXIT_USAGE = 2


def skills(
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    workspace: str | None = typer.Option(
        None, "--workspace", metavar="DIR", help="the session's workspace (default: the current directory)"
    ),
) -> None:
    """List the skills (name, where from, description, allowed tools) and the folders that failed to parse."""
    from geode.home import GeodeHome
    from geode.skills.catalogue import discover, geode_tool_names, skill_files

    home = GeodeHome.from_env()
    ws = Path(workspace or os.getcwd()).expanduser().resolve()
    trusted, config_note = _trusted(home)
    cat = discover(home.root, ws, trusted)
    notes = [*([config_note] if config_note else []), *cat.notes]
    rows: list[dict[str, Any]] = [
        {
            "name": s.name,
            "source": s.source,
            "folder": str(s.folder),
            "description": s.description,
            "allowed_tools": list(s.allowed_tools) if s.allowed_tools is not None else None,
            # what they narrow a session to while in use (GEODE's names; use_skill always stays)
            "geode_tools": sorted(geode_tool_names(s.allowed_tools)) if s.allowed_tools is not None else None,
            "license": s.license,
            "files": skill_files(s),
        }
        for s in cat.skills
    ]
    failed = [{"folder": str(f.folder), "source": f.source, "error": f.reason} for f in cat.failures]
    if as_json:
        typer.echo(json.dumps({"skills": rows, "failed": failed, "notes": notes}, indent=2))
        return
    if not rows and not failed:
        typer.echo(f"no skills (in {home.root / 'skills'} or {ws / '.geode' / 'skills'})")
    for r in rows:
        typer.echo(f"{r['name']} ({r['source']}): {r['description']}")
        typer.echo(f"  folder: {r['folder']}")
        if r["allowed_tools"] is not None:
            shown = ", ".join(r["allowed_tools"]) or "none"
            typer.echo(f"  allowed tools: {shown} (while in use: {', '.join(r['geode_tools']) or 'none'})")
    for f in failed:
        typer.echo(f"failed: {f['folder']}: {f['error']}")
    for note in notes:
        typer.echo(f"note: {note}")


def _trusted(home: Any) -> tuple[tuple[str, ...], str]:
    """The config's ``[trust] projects`` and, when the config cannot be read, a note saying so."""
    from geode.config_schema import GeodeConfig
    from geode.config_source import ConfigSource
    from geode.protocol.errors import GeodeError

    try:
        cfg = ConfigSource(home, GeodeConfig.from_raw, tree=True).snapshot
    except (GeodeError, OSError) as exc:
        why = getattr(exc, "message", "") or str(exc)
        return (), f"config not read ({why}): project skills are not loaded"
    return tuple(cfg.trust.projects), ""


def doctor_checks(
    home: Any, trusted: tuple[str, ...] | list[str], cwd: str | None = None
) -> list[dict[str, Any]]:
    """`geode doctor`: a warning per skill folder that failed to parse (home, and the current directory's
    trusted project), with its one-line reason."""
    from geode.skills.catalogue import discover

    ws = Path(cwd or os.getcwd()).resolve()
    cat = discover(home.root, ws, tuple(trusted))
    return [
        {
            "name": "skills",
            "ok": True,
            "detail": f"{f.folder}: {f.reason} (skill not loaded)",
            "warn": True,
            "unused": False,
        }
        for f in cat.failures
    ]


def register(app: typer.Typer) -> None:
    app.command("skills")(skills)
