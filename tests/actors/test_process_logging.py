"""A process's log line: the stock timestamp (date and seconds formatted once a second) and nothing looked up
that the line does not say (no stack walk for the caller's file and line, issue 34)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = r"""
import logging, sys, time
from unittest import mock
from pathlib import Path
from actors.tree import process_logging
from geode.config_schema import GeodeConfig
from geode.home import GeodeHome

home = GeodeHome(Path(sys.argv[1])).ensure()
process_logging.configure(home, "store", 3, settings=GeodeConfig())
log = logging.getLogger("geode.records.service")
walks = []
real = logging.Logger.findCaller
counted = lambda self, *a, **k: walks.append(1) or real(self, *a, **k)
with mock.patch.object(logging.Logger, "findCaller", counted):
    with mock.patch("time.time", return_value=1_700_000_000.25):
        log.info("one %s", "a")
        log.info("two")
    with mock.patch("time.time", return_value=1_700_000_001.5):
        log.warning("three")
print(len(walks))
"""


def test_lines_keep_the_stock_format_and_skip_the_caller_lookup(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "0"  # the caller's frame not looked up for a line that does not print it
    lines = (tmp_path / "logs" / "store.log").read_text().splitlines()
    stamp = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})"
    pattern = re.compile(stamp + r" store#3 pid=\d+ (INFO|WARNING) geode\.records\.service: (.*)$")
    parsed = [pattern.match(line) for line in lines]
    assert all(parsed), lines
    got = [(m.group(2), m.group(3), m.group(4)) for m in parsed if m]
    assert got == [("250", "INFO", "one a"), ("250", "INFO", "two"), ("500", "WARNING", "three")]
    first, third = (m.group(1) for m in (parsed[0], parsed[2]) if m)
    assert first == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1_700_000_000))
    assert third == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1_700_000_001))  # the next second anew


# A zygote's fork: the parent set the root level already (preset_root_level), so the child's configure does
# not clear every logger's cache again (a visit of each logger: pages copied from the zygote in every child);
# without the preset (an exec'd child) it sets the level: a logger that had cached "INFO is off" logs INFO.
LEVEL_SCRIPT = r"""
import logging, sys
from unittest import mock
from pathlib import Path
from actors.tree import process_logging
from geode.config_schema import GeodeConfig
from geode.home import GeodeHome

home = GeodeHome(Path(sys.argv[1])).ensure()
log = logging.getLogger("geode.records.service")
if sys.argv[2] == "preset":
    process_logging.preset_root_level(GeodeConfig())
log.info("before")  # caches this logger's answer for INFO under the level of the moment
clears = []
real = logging.Manager._clear_cache
with mock.patch.object(logging.Manager, "_clear_cache", lambda self: clears.append(1) or real(self)):
    process_logging.configure(home, "store", 3, settings=GeodeConfig())
log.info("after")
print(len(clears), logging.getLogger().level)
"""


def test_a_child_of_the_zygote_keeps_the_preset_level_and_logs_at_it(tmp_path: Path) -> None:
    for mode, clears in (("preset", 0), ("exec", 1)):
        home = tmp_path / mode
        out = subprocess.run(
            [sys.executable, "-c", LEVEL_SCRIPT, str(home), mode],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert out.stdout.split() == [str(clears), "20"], (mode, out.stdout, out.stderr)
        lines = (home / "logs" / "store.log").read_text().splitlines()
        assert [line.rsplit(": ", 1)[1] for line in lines] == ["after"], (mode, lines)
