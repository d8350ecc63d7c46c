"""Every `geode … --help` shows its bracketed names (`[loop]`, `[verify]`, `[[mcp.servers]]`, `[OPTIONS]`):
typer renders help through rich markup, which silently drops an unescaped ``[word]`` as a style tag."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import typer.main
from typer.testing import CliRunner

from actors.cli.main import build_app

BRACKETED = re.compile(r"\[+[^\[\]\s][^\[\]]*\]+")


def _commands(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command under ``cmd`` (typer's click, which typer may vendor: duck-typed), with its path."""
    yield path, cmd
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            if not sub.hidden:
                yield from _commands(sub, (*path, name))


def _source_texts(cmd: Any) -> list[str]:
    texts = [cmd.help or "", cmd.short_help or ""]
    texts += [getattr(p, "help", None) or "" for p in cmd.params]
    return [t.replace("\\[", "[") for t in texts]  # what an escaped bracket is meant to show


def _flat(text: str) -> str:
    """The rendered help as one line: rich's box edges and wrapping removed."""
    return " ".join(text.replace("│", " ").split())


def test_every_help_text_keeps_its_bracketed_names() -> None:
    app = build_app()
    root = typer.main.get_command(app)
    runner = CliRunner()
    checked, lost = 0, []
    for path, cmd in _commands(root):
        wanted = {m for t in _source_texts(cmd) for m in BRACKETED.findall(t)}
        if not wanted:
            continue
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "400"})
        assert result.exit_code == 0, (path, result.output)
        shown = _flat(result.output)
        for name in sorted(wanted):
            checked += 1
            if _flat(name) not in shown:
                lost.append(f"geode {' '.join(path)} --help lost {name!r}")
    assert not lost, "\n".join(lost)
    assert checked >= 3  # reload's [loop] and [verify] at least: the walk reached the commands


def test_reload_help_names_the_sections_it_rereads() -> None:
    out = CliRunner().invoke(build_app(), ["reload", "--help"], env={"COLUMNS": "200"}).output
    assert "loop workers use the new [loop], [verify] and providers" in _flat(out)
    assert "--dry-run" in out
