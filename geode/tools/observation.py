"""Settle uncertain effects by looking: a receipt admitted with an :class:`Observation` is reconciled
``applied`` when its target holds the intended state, ``not_applied`` when it still holds the state before,
and stays uncertain (for a person) otherwise; ``reconciled_by = "observation"``, the states as evidence."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import threading
from collections.abc import Callable

from geode.records.client import RecordClient
from geode.records.models import Observation, Receipt, ReceiptState
from geode.redaction import redact_text

log = logging.getLogger(__name__)
FILE_SHA256 = "file_sha256"  # a file's sha256 (hex); ABSENT when there is none
ABSENT = "absent"
NOT_A_FILE = "not_a_regular_file"
BY = "observation"
SWEEP_S = 30.0  # the executor's reconcile sweep: every uncertain receipt it can observe, this often


def file_state(path: str) -> str:
    """What a file-writing effect left at ``path``: its sha256, ``absent``, or ``not_a_regular_file``
    (read without following a final symlink)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ABSENT
    if not stat.S_ISREG(st.st_mode):
        return NOT_A_FILE
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_observation(path: str, before: str, intended: bytes) -> Observation | None:
    """The observation of a write of ``intended`` to ``path`` (None when the path would not be stored as is:
    receipts hold no secret, so a path that redaction changes is not observed and stays a person's call)."""
    if redact_text(path, 4096) != path or len(path) > 4096:
        return None
    return Observation(
        kind=FILE_SHA256, target=path, before=before, intended=hashlib.sha256(intended).hexdigest()
    )


PROBES: dict[str, Callable[[str], str]] = {FILE_SHA256: file_state}


def look(obs: Observation) -> str | None:
    """The target's state now (None: this kind cannot be observed here, or looking failed)."""
    probe = PROBES.get(obs.kind)
    if probe is None:
        return None
    try:
        return probe(obs.target)
    except OSError as exc:
        log.info("could not observe %s: %s", obs.kind, redact_text(str(exc), 300))
        return None


def settle(records: RecordClient, receipt: Receipt) -> Receipt | None:
    """Reconcile one uncertain receipt by observation; None when it stays uncertain."""
    obs = receipt.observation
    if obs is None or receipt.state != ReceiptState.UNCERTAIN:
        return None
    found = look(obs)
    verdict = obs.verdict(found) if found is not None else None
    if found is None or verdict is None:
        return None
    evidence = obs.model_copy(update={"observed": found})
    state = "the intended" if verdict == "applied" else "still the earlier"
    note = f"{obs.kind} of the target is {state} state ({found[:16]}); before {obs.before[:16]}"
    return records.reconcile(receipt.operation_id, outcome=verdict, by=BY, note=note, evidence=evidence)


def settle_uncertain(records: RecordClient, owner_name: str) -> list[Receipt]:
    """Settle every uncertain receipt an executor named ``owner_name`` admitted (its host's files only:
    another host's targets are not here). A receipt reconciled meanwhile by someone else is skipped."""
    settled = []
    for r in records.list_receipts(uncertain_only=True):
        if r.observation is None or r.owner.rpartition("#")[0] != owner_name:
            continue
        try:
            done = settle(records, r)
        except Exception as exc:  # reconciled meanwhile (conflict), or the store went away: next sweep
            log.info("observation of %s not recorded: %s", r.operation_id, redact_text(str(exc), 300))
            continue
        if done is not None:
            log.info("receipt %s reconciled by observation: %s", r.operation_id, done.outcome)
            settled.append(done)
    return settled


class ObservationSweep:
    """The executor's reconcile sweep: at start (after marking its dead incarnations' admitted receipts
    uncertain) and every ``interval_s``, settle what can be observed. Runs on its own daemon thread."""

    def __init__(
        self, records: RecordClient, owner: str, *, interval_s: float = SWEEP_S, retry_s: float = 0.5
    ) -> None:
        self._records = records
        self.name, _, inc = owner.rpartition("#")
        self.incarnation = int(inc) if inc.isdigit() else 0
        self._interval_s, self._retry_s = interval_s, retry_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="observation-sweep", daemon=True)

    def start(self) -> ObservationSweep:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        first, wait_s = True, self._retry_s
        while not self._stop.is_set():
            try:
                if first and self.incarnation > 0:  # an earlier incarnation is dead: its effects are unknown
                    self._records.owner_died(self.name, self.incarnation - 1)
                settle_uncertain(self._records, self.name)
                first, wait_s = False, self._interval_s
            except Exception as exc:  # the store does not answer (yet): again, backing off to the interval
                log.info("observation sweep: %s", redact_text(str(exc), 300))
                wait_s = min(self._interval_s, wait_s * 2)
            self._stop.wait(wait_s)
