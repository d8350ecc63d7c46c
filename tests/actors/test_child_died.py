"""runtime.child_died reaches store and lanes, retried until each acknowledges (stand-in services ack)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from actors.bus import Bus
from actors.messengers import MessengersChild
from actors.tree.child_died import ChildDiedNotifier
from geode.home import GeodeHome
from geode.messengers.bindings import Bindings
from geode.messengers.config import MessengersSection
from tests.actors.supervision_kit import wait_for


def test_retried_until_acknowledged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="actors.tree.child_died")
    home = GeodeHome(tmp_path / "h").ensure()
    sup = Bus("supervisor", 1, home).start()
    store = Bus("store", 1, home).start()
    lanes = Bus("lanes", 1, home).start()
    # any service that answers runtime.child_died and remembers it (the messengers child's does)
    store_svc, lanes_svc = (
        MessengersChild(n, 1, MessengersSection(), Bindings([])) for n in ("store", "lanes")
    )
    notifier = ChildDiedNotifier(sup.transport, ("store", "lanes"), timeout_s=0.2, max_backoff_s=0.2)
    try:
        store.serve("store", store_svc.dispatch())
        notifier.notify("loop-1", 3, "killed by SIGKILL")
        wait_for(lambda: store_svc.deaths, 5, what="store ack")

        # lanes is not serving yet: the notice is retried (twice at least), not lost
        def retried_twice() -> bool:
            lines = [r.getMessage() for r in caplog.records]
            return sum("→ lanes" in m and "retrying" in m for m in lines) >= 2

        wait_for(retried_twice, 10, what="two failed attempts to tell lanes")
        assert not lanes_svc.deaths
        lanes.serve("lanes", lanes_svc.dispatch())
        wait_for(lambda: lanes_svc.deaths, 5, what="lanes ack after it came up")
        assert lanes_svc.deaths[0].model_dump() == {
            "name": "loop-1",
            "incarnation": 3,
            "reason": "killed by SIGKILL",
        }
        notifier.notify("store", 2, "exit 1")  # the dead child itself is not told
        wait_for(lambda: len(lanes_svc.deaths) == 2, 5)
        assert len(store_svc.deaths) == 1
    finally:
        notifier.stop()
        for b in (lanes, store, sup):
            b.stop()
