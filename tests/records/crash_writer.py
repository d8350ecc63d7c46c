"""A client process for the crash test: writes a checkpoint chain, timeline rows and receipts; logs acks."""

from __future__ import annotations

import sys
from pathlib import Path

from actors.bus import Bus
from geode.home import GeodeHome
from geode.records.models import CheckpointSave, ReceiptIdentity, TimelineEvent
from geode.records.store_client import StoreClient


def main() -> None:
    home, idx, n, ack_path = GeodeHome(Path(sys.argv[1])), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    bus = Bus(f"writer{idx}", 1, home).start()
    client = StoreClient(bus.transport, timeout_s=1.0, attempts=40, backoff_s=0.05, max_backoff_s=0.5)
    sid = f"crash-{idx}"
    with open(ack_path, "a", buffering=1) as acks:
        for i in range(n):
            msg = {"role": "user", "content": f"{idx}:{i}"}
            client.save_checkpoint(
                CheckpointSave(session_id=sid, seq=i + 1, base_count=i, new_messages=[msg])
            )
            acks.write(f"ck {sid} {i + 1}\n")
            client.append_timeline(
                TimelineEvent(session_id=sid, event_id=f"e{i}", kind="k", ts=0.0, payload={"i": i})
            )
            acks.write(f"tl {sid} e{i}\n")
            op = f"{sid}-op{i}"
            ident = ReceiptIdentity(
                session_id=sid, turn_id="t", step_id=f"st{i}", tool_name="w", fingerprint="f"
            )
            kind = client.admit(op, ident, owner=f"writer{idx}#1", effect="write").kind.value
            if kind == "new":
                client.commit(op, {"i": i})
                acks.write(f"rc {op} committed\n")
    print(f"done retries={client.retries}", flush=True)
    bus.stop()


if __name__ == "__main__":
    main()
