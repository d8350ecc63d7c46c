"""Helper process for the disk-full test: RLIMIT_FSIZE makes data.mdb unable to grow (EFBIG, like ENOSPC)."""

from __future__ import annotations

import json
import resource
import signal
import sys
from pathlib import Path

from geode.protocol.errors import GeodeError
from geode.records.engine import RecordEngine
from geode.records.models import CheckpointSave


def main() -> None:
    root = Path(sys.argv[1])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2 * 1024 * 1024, resource.RLIM_INFINITY))
    engine = RecordEngine(root / "records", root / "evidence").open()
    acked, error = [], ""
    for i in range(1000):
        try:
            msgs = [{"role": "user", "content": "x" * 20_000}]
            engine.save_checkpoint(CheckpointSave(session_id=f"s{i}", seq=1, base_count=0, new_messages=msgs))
            acked.append(f"s{i}")
        except GeodeError as exc:
            error = f"{exc.code.value}: {exc.message}"
            break
    print(json.dumps({"acked": acked, "error": error}), flush=True)
    engine.close()


if __name__ == "__main__":
    main()
