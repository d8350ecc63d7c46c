"""The daemon `geode serve` starts: ``python -m actors.tree.daemon_main [--single-process]``.

It runs the tree exactly as ``geode serve --foreground`` does (:func:`actors.tree.serve.run_foreground`, the
worker role from the environment ``geode serve --role worker`` put there), without the CLI's command modules:
the supervisor process does not import typer and every command (≈ 5 MiB and 0.1-0.4 s at every start). And
it starts the zygote before it reads the config, forked once the tree's modules are imported
(``zygote_fork.py``: the zygote, and so every child, shares those pages with the supervisor instead of
importing them again), so the zygote imports the rest of the children's code while this process reads the
config (the tree adopts it; a refused start or ``zygote = false`` stops it at once).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from actors.tree.zygote_client import Zygote
    from geode.home import GeodeHome

USAGE = "usage: python -m actors.tree.daemon_main [--single-process] (started by `geode serve`)"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--single-process"]):
        print(USAGE, file=sys.stderr)
        return 2
    from actors.tree import path_parts

    path_parts.install()  # before any path is built: the zygote and every child inherit it
    from geode.home import GeodeHome

    home = GeodeHome.from_env()
    from actors.tree.serve import run_foreground

    zygote = None if args else early_zygote(home)
    return run_foreground(home, single_process=bool(args), zygote=zygote)


def early_zygote(home: GeodeHome) -> Zygote | None:
    """The zygote, started before this process imports the tree (None when it is off or cannot start)."""
    if os.environ.get("GEODE_ZYGOTE", "1") == "0":
        return None
    from actors.tree.zygote_client import Zygote

    try:
        home.ensure()
    except OSError:
        return None  # run_foreground says why
    zygote = Zygote({"GEODE_HOME": str(home.root), "PYTHONUNBUFFERED": "1"}, home.logs_dir / "zygote.log")
    zygote.start(fork=os.environ.get("GEODE_ZYGOTE_FORK", "1") != "0")  # "0": exec it (the baseline)
    return zygote if zygote.pid is not None else None


if __name__ == "__main__":
    sys.exit(main())
