"""Deterministic fault injection for the fault-matrix tests: ``GEODE_FAULTS`` names points where a process
dies (or exits, or hangs) once. Unset, ``fault(point)`` costs one module-level None check (docs/faults.md)."""

from __future__ import annotations

import fnmatch
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ENV = "GEODE_FAULTS"
ACTIONS = ("kill", "exit", "hang")
# Every injection point; ``fault()`` at a name not listed here is a programming error (see docs/faults.md).
POINTS = frozenset(
    {
        "executor.before_admit",  # approval granted, no receipt yet: nothing began
        "executor.after_admit",  # receipt admitted, the handler not called yet
        "executor.in_handler",  # the handler's work is done, it has not returned yet (its thread)
        "executor.after_handler",  # the handler returned, its result not committed
        "executor.after_commit",  # the receipt is committed, the reply not sent
        "store.after_admit",  # the store committed an admission, the reply not sent
        "store.after_commit",  # the store committed a receipt's result, the reply not sent
        "store.after_reply_admit",  # store.after_admit, for a chat reply's receipt only (step "reply")
        "store.after_reply_commit",  # store.after_commit, for a chat reply's receipt only
        "loop.before_pending_checkpoint",  # a batch proposed, not saved; the last batch's results unsaved
        "loop.after_pending_checkpoint",  # the pending batch is written ahead, no call sent yet
        "loop.before_completed_checkpoint",  # the batch ran; its results not saved (they ride the next save)
        "loop.after_compaction_record",  # a compaction summary's record saved, the view not sent to the model
        "lanes.after_turn_stored",  # the turn's running record stored, the turn not pushed to its worker
        "messengers.after_turn_record",  # a polled batch's turn records stored, the cursor not advanced
        "executor.reply_after_admit",  # a reply's receipt admitted, messenger.send not asked yet
        "executor.reply_after_send",  # messenger.send answered (posted), the reply's receipt not committed
        "messengers.after_post",  # messenger.send posted to the platform, the executor not answered yet
        "messengers.after_upload",  # messenger.send_file uploaded, the executor not answered yet
        "messengers.after_status_post",  # a turn's status message posted, its id not recorded (progress.py)
        "scheduler.after_due",  # an occurrence recorded due (the cursor moved), its turn not submitted
        "scheduler.after_submit",  # lanes acknowledged the occurrence's turn, the ledger not told
        "scheduler.after_turn_end",  # the scheduler read the turn's record done, its outcome not recorded
        "scheduler.before_reply",  # the scheduler is to ask the executor for the reply: nothing admitted
        "scheduler.after_reply_posted",  # the executor said the reply posted (or replayed), no outcome
        "scheduler.after_reply_uncertain",  # the executor said the reply is admitted, its post unknown
        "webhooks.after_intake",  # an intake recorded, the HTTP reply not sent (and its turn not submitted)
        "webhooks.after_submit",  # lanes acknowledged an intake's turn, the intake not marked submitted
        "webhooks.after_turn_end",  # the child read the intake's turn record done, answered not recorded
        "webhooks.after_reply_posted",  # the executor said the reply posted (or replayed), done not recorded
    }
)


@dataclass
class Fault:
    point: str
    action: str = "kill"
    nth: int = 1  # fire on the nth time this process reaches the point
    child: str | None = None  # a glob on GEODE_CHILD_NAME ("executor", "loop-*"); None: any process
    hits: int = 0


def parse(spec: str | None, child_name: str = "") -> dict[str, Fault] | None:
    """``[child@]point[:action[:nth]],...`` → the faults armed in process ``child_name`` (None: none)."""
    armed: dict[str, Fault] = {}
    for raw in (spec or "").split(","):
        item = raw.strip()
        if not item:
            continue
        child, _, rest = item.rpartition("@")
        point, _, tail = rest.partition(":")
        action, _, nth = tail.partition(":")
        f = Fault(point, action or "kill", int(nth) if nth else 1, child or None)
        if f.point not in POINTS:
            raise ValueError(f"{ENV}: unknown fault point {f.point!r} (known: {', '.join(sorted(POINTS))})")
        if f.action not in ACTIONS or f.nth < 1:
            raise ValueError(f"{ENV}: bad fault {item!r} (action one of {ACTIONS}, nth >= 1)")
        if f.child is None or fnmatch.fnmatchcase(child_name, f.child):
            armed[f.point] = f
    return armed or None


def marker(point: str) -> Path:
    """The file that says ``point`` fired (under the home): a later incarnation never fires it again."""
    home = Path(os.environ.get("GEODE_HOME") or "~/.geode").expanduser()
    return home / "faults" / f"{point}.fired"


_LOCK = threading.Lock()
_ARMED: dict[str, Fault] | None = parse(os.environ.get(ENV), os.environ.get("GEODE_CHILD_NAME", ""))


def fault(point: str) -> None:
    """An injection point: a no-op unless ``GEODE_FAULTS`` armed it in this process."""
    if _ARMED is None:
        return
    _reached(point)


def _reached(point: str) -> None:
    f = _ARMED.get(point) if _ARMED is not None else None
    if f is None:
        return
    with _LOCK:
        f.hits += 1
        if f.hits != f.nth or not _claim(f):
            return
    _act(f)


def _claim(f: Fault) -> bool:
    """Record that the fault fired (exclusively: only the first process to get here fires it)."""
    path = marker(f.point)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as out:
        out.write(f"{os.environ.get('GEODE_CHILD_NAME', '')} pid={os.getpid()} {f.action} hit={f.hits}\n")
        out.flush()
        os.fsync(out.fileno())
    return True


def _act(f: Fault) -> None:
    print(f"fault injected: {f.point} → {f.action} (pid {os.getpid()})", file=sys.stderr, flush=True)
    if f.action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif f.action == "exit":
        os._exit(70)
    else:  # hang: the point never returns (a deadline or the supervisor has to deal with it)
        while True:
            time.sleep(3600)


def rearm(spec: str | None, child_name: str = "") -> None:
    """Re-read the faults (unit tests of this module; processes read ``GEODE_FAULTS`` once at import)."""
    global _ARMED
    _ARMED = parse(spec, child_name)
