"""Logging set-up, once per process: one file per process under ``GeodeHome.logs_dir``."""

from __future__ import annotations

import logging
import os

from geode.home import GeodeHome

_configured = False


def configure(home: GeodeHome, name: str, incarnation: int | None = None) -> None:
    """Send the root logger to ``<logs>/<name>.log`` (level from ``[log] level``, default INFO)."""
    global _configured
    if _configured:
        return
    _configured = True
    home.logs_dir.mkdir(parents=True, exist_ok=True)
    level = str((home.load_config().get("log") or {}).get("level", "INFO")).upper()
    who = f"{name}#{incarnation}" if incarnation is not None else name
    handler = logging.FileHandler(home.logs_dir / f"{name}.log")
    handler.setFormatter(
        logging.Formatter(f"%(asctime)s {who} pid={os.getpid()} %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(getattr(logging, level, logging.INFO))
