"""Logging set-up, once per process: one file per process under ``GeodeHome.logs_dir``."""

from __future__ import annotations

import logging
import os
import time

from geode.config_schema import GeodeConfig
from geode.home import GeodeHome
from geode.private_dir import private_file
from geode.telemetry import spans

_configured = False


def configure(home: GeodeHome, name: str, incarnation: int | None = None, *, settings: GeodeConfig) -> None:
    """Send the root logger to ``<logs>/<name>.log`` (level from ``[log] level``, default INFO)."""
    global _configured
    if _configured:
        return
    _configured = True
    home.logs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = home.logs_dir / f"{name}.log"
    private_file(path)  # 0600, also when the supervisor created it for the child's stdout
    who = f"{name}#{incarnation}" if incarnation is not None else name
    handler = logging.FileHandler(path)
    trace = ""
    if settings.telemetry.enabled:  # a line logged under a span says its trace id
        trace = "%(geode_trace)s"
        handler.addFilter(_with_trace_id)
    handler.setFormatter(
        _LineFormat(f"%(asctime)s {who} pid={os.getpid()} %(levelname)s %(name)s{trace}: %(message)s")
    )
    # The line says none of the caller's file, line, function, thread or process name: logging need not look
    # them up for every record (a stack walk and three lookups, ~40 % of a line's CPU; issue 34).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    root.addHandler(handler)
    wanted = root_level(settings)
    if root.level != wanted:  # a zygote's fork: its parent set this level already (preset_root_level)
        root.setLevel(wanted)


def root_level(settings: GeodeConfig) -> int:
    """The root logger's level from ``[log] level`` (INFO when the name is not a level)."""
    level = getattr(logging, settings.log.level, logging.INFO)
    return level if isinstance(level, int) else logging.INFO


def preset_root_level(settings: GeodeConfig) -> None:
    """In the zygote, before it forks: the root logger at the level its children set.

    ``Logger.setLevel`` clears every logger's cache: it visits each of the process's loggers (111-140 in a
    child: the SDKs' and the tree's), and those reference-count writes copied 0.5-0.7 MiB of the zygote's
    pages into every child at that step (0.1-0.3 MiB less at rest: later steps touch some of those pages).
    Set once here, the child finds its level already set and skips it (the caches are valid: a logger's
    cached answer depends on the levels only, which are the same)."""
    root = logging.getLogger()
    wanted = root_level(settings)
    if root.level != wanted:
        root.setLevel(wanted)


class _LineFormat(logging.Formatter):
    """The stock line, its time's date-and-seconds part formatted once a second, not once a line."""

    _second = -1
    _text = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        second = int(record.created)
        if second != self._second:
            self._text = time.strftime(self.default_time_format, self.converter(second))
            self._second = second
        return f"{self._text},{int(record.msecs):03d}"  # logging's default_msec_format, "%s,%03d"


def _with_trace_id(record: logging.LogRecord) -> bool:
    trace_id = spans.trace_id(spans.current())
    record.geode_trace = f" trace={trace_id}" if trace_id else ""
    return True
