"""A second scheduler for the ledger's claim test: its own process and bus client, driven by stdin lines.

``race <job> <first instant> <n>``: claim each of n hourly instants and record the claimed ones due, printing
``fired <i>`` per instant it fired, then ``end``; ``claim <job> <instant> <lease_s>`` and ``due <job>
<instant>`` print the claim's kind or the due's outcome (``due`` or the refusal's tag)."""

from __future__ import annotations

import os
import sys
from datetime import datetime, timedelta
from pathlib import Path

from actors.bus import Bus
from geode.home import GeodeHome
from geode.records.schedule_client import LedgerClient
from geode.records.schedule_models import LedgerConflict
from geode.schedule.occurrences import OccurrenceId


def main() -> None:
    home = GeodeHome(Path(sys.argv[1]))
    bus = Bus("claimant", 1, home).start()
    client = LedgerClient(bus.transport, timeout_s=10.0)
    holder = f"claimant:{os.getpid()}"
    print("ready", flush=True)
    for line in sys.stdin:
        cmd, job, when, *rest = line.split()
        first = datetime.fromisoformat(when)
        if cmd == "race":
            for i in range(int(rest[0])):
                occ = OccurrenceId(job=job, instant=first + timedelta(hours=i))
                if client.claim(occ, holder=holder).fire:
                    client.due(occ, holder=holder)
                    print(f"fired {i}", flush=True)
            print("end", flush=True)
        elif cmd == "claim":
            occ = OccurrenceId(job=job, instant=first)
            print(client.claim(occ, holder=holder, lease_s=float(rest[0])).kind.value, flush=True)
        elif cmd == "due":
            try:
                client.due(OccurrenceId(job=job, instant=first), holder=holder)
                print("due", flush=True)
            except LedgerConflict as exc:
                print(exc.tag, flush=True)
    bus.stop()


if __name__ == "__main__":
    main()
