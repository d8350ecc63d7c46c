"""The daemon `geode serve` starts: ``python -m actors.tree.daemon_main [--single-process]``.

It runs the tree exactly as ``geode serve --foreground`` does (:func:`actors.tree.serve.run_foreground`, the
worker role from the environment ``geode serve --role worker`` put there), without the CLI's command modules:
the supervisor process does not import typer and every command (≈ 5 MiB and 0.1-0.4 s at every start).
"""

from __future__ import annotations

import sys

USAGE = "usage: python -m actors.tree.daemon_main [--single-process] (started by `geode serve`)"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--single-process"]):
        print(USAGE, file=sys.stderr)
        return 2
    from actors.tree.serve import run_foreground
    from geode.home import GeodeHome

    return run_foreground(GeodeHome.from_env(), single_process=bool(args))


if __name__ == "__main__":
    sys.exit(main())
