"""`geode ask`'s hand parser (actors/cli/main.py ``_ask_args``, issue 34: argparse, gettext and locale were
~2 ms of its start) reads every command line the argparse parser it replaced read, the same way; a line
that parser refused, or one it is unsure of, goes to the typer app (None), never to a different prompt."""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

import pytest

from actors.cli.main import _ask_args


class _Refused(Exception):
    pass


def _argparse_reading(argv: list[str]) -> dict[str, Any] | None:
    """What the hot path's argparse parser (main.py before this change) made of ``argv``."""

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            raise _Refused(message)

    if any(a in ("--help", "-h") for a in argv[: argv.index("--") if "--" in argv else len(argv)]):
        return None
    p = Parser(prog="geode ask", add_help=False, allow_abbrev=False)
    p.add_argument("prompt")
    p.add_argument("--json", dest="as_json", action="store_true")
    p.add_argument("--resume", default=None)
    p.add_argument("--continue", dest="cont", action="store_true")
    p.add_argument("--model", default=None)
    p.add_argument("--dangerously-skip-permissions", dest="skip", action="store_true")
    p.add_argument("--timeout", type=float, default=3600.0)
    p.add_argument("--output-format", dest="output_format", default=argparse.SUPPRESS)
    try:
        return vars(p.parse_args(argv))
    except _Refused:
        return None


READ = [  # lines the hot path must read itself (each a user's ordinary `geode ask`)
    ["hello there"],
    ["--json", "--model=m1", "--dangerously-skip-permissions", "--timeout", "5", "--resume=", "--", "-x"],
    ["--continue", "--resume", "s-1", "p"],
    ["p", "--json"],
    ["--output-format", "stream-json", "p"],
    ["--output-format=json", "--timeout=0.5", "p"],
    ["--model", "m", "--model", "n", "p"],  # the last one counts
    ["-5"],
    ["--timeout", "-2.5", "p"],
    ["-x y"],
    ["--model", "-m x", "p"],
    ["-"],
    [""],
    ["--", "--json"],
    ["--timeout", "1e3", "p"],
]
EDGES = [  # lines either the typer app or the hot path may take, never read differently
    ["--help"],
    ["p", "-h"],
    ["--", "-h"],
    ["--bogus", "p"],
    [],
    ["a", "b"],
    ["--js", "p"],
    ["--json=1", "p"],
    ["--timeout", "soon", "p"],
    ["--timeout=", "p"],
    ["--model"],
    ["--model", "--json", "p"],
    ["--model", "-x", "p"],
    ["p", "--", "q"],
    ["--", "a", "b"],
    ["--"],
    ["--", "--"],
    ["-5=3"],
    ["-.5"],
    ["-1.", "p"],
    ["--model=a b", "p"],
    ["-٣"],
    ["--resume"],
]


@pytest.mark.parametrize("argv", READ)
def test_the_hot_parser_reads_what_argparse_read(argv: list[str]) -> None:
    expected = _argparse_reading(argv)
    assert expected is not None, "the reference parser refused a line of READ"
    assert _ask_args(argv) == expected


@pytest.mark.parametrize("argv", EDGES)
def test_a_line_is_read_as_argparse_read_it_or_left_to_the_typer_app(argv: list[str]) -> None:
    got = _ask_args(argv)
    assert got is None or got == _argparse_reading(argv)
