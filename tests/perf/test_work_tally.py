"""The work tally itself: counts land in ``<dir>/<pid>.tally``, a forked child counts into its own file, and
nothing is written when ``GEODE_WORK_TALLY`` is unset (geode/work_tally.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from geode.work_tally import read_all, read_tallies

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, tally_dir: Path | None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("GEODE_WORK_TALLY", "GEODE_CHILD_NAME")}
    if tally_dir is not None:
        env["GEODE_WORK_TALLY"] = str(tally_dir)
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_counts_land_in_the_process_file_and_a_forked_child_counts_into_its_own(tmp_path: Path) -> None:
    out = _run(
        """
        import os
        from geode import work_tally as w
        w.set_role("parent")
        for _ in range(5):
            w.count("frame.decoded", "store.timeline.append")
        w.count("handoff.pool", n=3)
        pid = os.fork()
        if pid == 0:
            w.count("frame.decoded", "lanes.turn_event")
            os._exit(0)
        os.waitpid(pid, 0)
        w.count("handoff.pool")
        print(os.getpid(), pid)
        """,
        tmp_path,
    )
    parent, child = (int(x) for x in out.split())
    files = read_all(tmp_path)
    assert set(files) == {parent, child}
    assert files[parent] == (
        "parent",
        {"frame.decoded": 5, "frame.decoded:store.timeline.append": 5, "handoff.pool": 4},
    )
    role, counts = files[child]
    assert counts == {"frame.decoded": 1, "frame.decoded:lanes.turn_event": 1}  # none of its parent's
    assert role != "parent"  # the child does not inherit the parent's name
    assert read_tallies(tmp_path)[parent]["handoff.pool"] == 4


def test_the_bus_codec_counts_frames_by_type_and_nothing_is_written_when_off(tmp_path: Path) -> None:
    code = """
        from geode.protocol import codec
        from geode.protocol.envelope import Envelope
        env = Envelope(id="1", kind="request", type="runtime.ping", body={})
        for _ in range(3):
            codec.decode(codec.encode(env))
        """
    _run(code, tmp_path)
    ((_role, counts),) = read_all(tmp_path).values()
    assert counts["frame.encoded:runtime.ping"] == 3
    assert counts["frame.decoded:runtime.ping"] == 3
    assert counts["validation"] == 3  # each frame decoded validated once

    probe = "from geode import work_tally as w\n        print(codec.tally is w._noop, w._state)\n"
    off = _run(code + probe, None)
    assert off.split() == ["True", "None"]  # unset: the hook is the no-op and no file was opened


def test_a_hand_off_is_counted_under_the_message_its_thread_last_handled(tmp_path: Path) -> None:
    _run(
        """
        import threading
        from geode import work_tally as w
        w.frame("frame.decoded", "turn.event")
        w.handoff("handoff.post")
        w.handoff("handoff.post")
        t = threading.Thread(target=w.handoff, args=("handoff.pool",))
        t.start()
        t.join()
        """,
        tmp_path,
    )
    ((_role, counts),) = read_all(tmp_path).values()
    assert counts["handoff.post:turn.event"] == 2
    assert counts["handoff.pool:-"] == 1  # a thread that handled no message yet
    assert counts["handoff.post"] + counts["handoff.pool"] == 3
