"""pydantic-core's compiled module alone, for the CLI's stored schemas (its ``SchemaValidator`` and
``ValidationError``).

``import pydantic_core`` runs its package's ``__init__``: ``core_schema`` and ``typing_extensions``, ~30 of
its ~40 ms here, none of which a validator built from a stored schema uses. `geode ask` builds its first
validator between its handshake and its prompt (actors/cli/wire.py), so that import was on the way to the
first model request. :func:`core` loads ``pydantic_core._pydantic_core`` by itself, under its own name in
``sys.modules`` (a later ``import pydantic_core`` in the same process finds it there and runs the
extension's init no second time), and falls back to the plain import wherever the package is not found on
``sys.path`` as files.
"""

from __future__ import annotations

import sys
from typing import Any

NAME = "pydantic_core._pydantic_core"


def core() -> Any:
    """The compiled module (loaded once)."""
    mod = sys.modules.get(NAME)
    if mod is not None:
        return mod
    if "pydantic_core" not in sys.modules:
        from importlib.machinery import PathFinder
        from importlib.util import module_from_spec

        pkg = PathFinder.find_spec("pydantic_core")
        where = None if pkg is None else pkg.submodule_search_locations
        spec = None if where is None else PathFinder.find_spec(NAME, list(where))
        if spec is not None and spec.loader is not None:
            mod = module_from_spec(spec)
            sys.modules[NAME] = mod
            try:
                spec.loader.exec_module(mod)
            except BaseException:
                del sys.modules[NAME]
                raise
            return mod
    import pydantic_core._pydantic_core as plain

    return plain
