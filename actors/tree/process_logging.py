"""Logging set-up, once per process: one file per process under ``GeodeHome.logs_dir``."""

from __future__ import annotations

import logging
import os

from geode.config_schema import GeodeConfig
from geode.home import GeodeHome
from geode.private_dir import private_file

_configured = False


def configure(
    home: GeodeHome, name: str, incarnation: int | None = None, *, settings: GeodeConfig
) -> None:
    """Send the root logger to ``<logs>/<name>.log`` (level from ``[log] level``, default INFO)."""
    global _configured
    if _configured:
        return
    _configured = True
    home.logs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = home.logs_dir / f"{name}.log"
    private_file(path)  # 0600, also when the supervisor created it for the child's stdout
    level = settings.log.level
    who = f"{name}#{incarnation}" if incarnation is not None else name
    handler = logging.FileHandler(path)
    handler.setFormatter(
        logging.Formatter(f"%(asctime)s {who} pid={os.getpid()} %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(getattr(logging, level, logging.INFO))

