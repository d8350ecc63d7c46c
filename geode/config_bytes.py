"""``config.toml`` as bytes, never parsed: the CLI's cheap checks of a running tree's file (no tomllib, no
logging, no schema). Reading the settings is ``geode.config_source``'s and ``geode.config_file``'s job."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from geode.home import GeodeHome
    from geode.home_paths import HomePaths

LAST_GOOD = "config.good.toml"  # under the run directory (0700): the last config the full check passed


def _read(path: str | os.PathLike[str]) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def known_good(home: GeodeHome | HomePaths) -> bool:
    """True when ``config.toml`` is absent, empty or byte for byte the last good copy: fine without parsing
    it (the CLI skips the typed check, ~140 ms, on this answer). ``home`` may be a ``HomePaths`` (`geode
    ask`, before pathlib)."""
    try:
        raw = _read(home.config_file)
    except FileNotFoundError:
        return True
    except OSError:
        return False  # said by geode.config_file.file_problem
    if raw == b"":
        return True
    try:
        return _read(os.path.join(home.run_dir, LAST_GOOD)) == raw
    except OSError:
        return False


def mentions(home: GeodeHome, needle: bytes) -> bool:
    """Whether ``config.toml`` or its last good copy holds ``needle`` (a file that cannot be read: True, so
    the caller takes the full way); ``geode status`` looks for ``bus`` before its light reads."""
    for path in (home.config_file, home.run_dir / LAST_GOOD):
        try:
            if needle in path.read_bytes():
                return True
        except FileNotFoundError:
            continue
        except OSError:
            return True
    return False
