"""A stand-in for a slow provider SDK import, for tests/actors/test_zygote_swap_tree.py: the zygote imports it
with the SDKs (``GEODE_ZYGOTE_WARM``) and blocks until the test opens the gate (the FIFO named by
``GEODE_TEST_SDK_GATE``), so the window in which the loop workers run without the SDKs lasts as long as the
test needs, whatever the machine's load."""

from __future__ import annotations

import os

GATE_ENV = "GEODE_TEST_SDK_GATE"

_path = os.environ.get(GATE_ENV)
if _path:
    _fd = os.open(_path, os.O_RDONLY)  # blocks until the test opens the FIFO for writing
    try:
        os.read(_fd, 1)  # and until it writes (or closes)
    finally:
        os.close(_fd)
