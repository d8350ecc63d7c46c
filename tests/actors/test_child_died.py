"""runtime.child_died reaches store and lanes, retried until each acknowledges (stand-in services ack)."""

from __future__ import annotations

import time
from pathlib import Path

from actors.bus import Bus
from actors.messengers import MessengersService
from actors.tree.child_died import ChildDiedNotifier
from geode.home import GeodeHome
from tests.actors.supervision_kit import wait_for


def test_retried_until_acknowledged(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    sup = Bus("supervisor", 1, home).start()
    store = Bus("store", 1, home).start()
    lanes = Bus("lanes", 1, home).start()
    store_svc, lanes_svc = MessengersService("store", 1), MessengersService("lanes", 1)
    notifier = ChildDiedNotifier(sup.transport, ("store", "lanes"), timeout_s=0.2, max_backoff_s=0.2)
    try:
        store.serve("store", store_svc)
        notifier.notify("loop-1", 3, "killed by SIGKILL")
        wait_for(lambda: store_svc.deaths, 5, "store ack")
        time.sleep(0.5)  # lanes is not serving yet: the notice must wait for it, not be lost
        assert not lanes_svc.deaths
        lanes.serve("lanes", lanes_svc)
        wait_for(lambda: lanes_svc.deaths, 5, "lanes ack after it came up")
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
