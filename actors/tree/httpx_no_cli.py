"""httpx imported without its command-line client, in the zygote (so in every child it forks).

``import httpx`` also imports ``httpx._main``, the ``httpx`` command's code, whenever its optional
dependencies are installed, and the CLI's typer installs them: rich, click and pygments, ~86 modules and
~4.5 MiB of heap in the zygote (and so in the tree) that no child ever runs. httpx itself falls back to a
``main`` that says the CLI is not installed when ``httpx._main`` cannot be imported: the zygote has it so for
the duration of the import, then lets any later ``import httpx._main`` work as usual.
"""

from __future__ import annotations

import sys

CLI_MODULE = "httpx._main"


def import_httpx_without_cli() -> None:
    """Import httpx (when it is not yet) with ``httpx._main`` blocked: nothing else of httpx changes."""
    if "httpx" in sys.modules or CLI_MODULE in sys.modules:
        return
    sys.modules[CLI_MODULE] = None  # type: ignore[assignment]  # `from ._main import main` raises ImportError
    try:
        import httpx  # noqa: F401
    finally:
        if sys.modules.get(CLI_MODULE, 0) is None:
            del sys.modules[CLI_MODULE]
