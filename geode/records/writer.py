"""Group commit: one writer thread applies queued write operations in one transaction, syncs, then answers.

Each operation runs in a nested transaction, so an operation that raises is rolled back alone and the rest of
the batch still commits. A batch is acknowledged only after the top-level commit (sync on) returned: each
operation's :class:`~geode.protocol.later.Later` completes on the writer thread (a deferred reply's callback),
all of a batch's inside one :data:`~geode.protocol.later.answering` block: over the bus, their replies leave
together as the block ends (one socket lock, a batch frame per peer), not one send each.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import lmdb

from geode.protocol import later as deferred
from geode.protocol.errors import GeodeError, Overloaded, RequestTimeout, Unavailable
from geode.protocol.later import Later
from geode.records.lmdb_env import RecordEnv, Txn
from geode.work_tally import LMDB_WRITE_OP, LMDB_WRITE_TXN
from geode.work_tally import count as tally

log = logging.getLogger(__name__)

WriteFn = Callable[[Txn], Any]
T = TypeVar("T")
WRITE_TIMEOUT_S = 30.0  # how long a blocking write waits for its sync commit
MAP_FULL = "record store map is full"  # the start of a full map's Unavailable message


class _MapFull(Exception):
    pass


class _Op:
    __slots__ = ("fn", "future")

    def __init__(self, fn: WriteFn) -> None:
        self.fn = fn
        self.future = Later()


@dataclass
class WriterStats:
    batches: int = 0
    ops: int = 0
    failed_ops: int = 0
    failed_batches: int = 0
    max_batch: int = 0
    last_error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "ops": self.ops,
            "failed_ops": self.failed_ops,
            "failed_batches": self.failed_batches,
            "max_batch": self.max_batch,
            "mean_batch": round(self.ops / self.batches, 2) if self.batches else 0.0,
            "last_error": self.last_error,
        }


class GroupWriter:
    """The single writer of a :class:`RecordEnv`."""

    def __init__(self, renv: RecordEnv, *, max_batch: int = 256, queue_max: int = 10000) -> None:
        self.renv = renv
        self.max_batch = max_batch
        # a SimpleQueue (C): put and get without the Python-level Condition of queue.Queue (≈ 5 µs a write)
        self._q: queue.SimpleQueue[_Op | None] = queue.SimpleQueue()
        self.queue_max = queue_max
        self._thread: threading.Thread | None = None
        self.stats = WriterStats()
        self.after_commit: list[Callable[[], None]] = []

    def start(self) -> GroupWriter:
        self._thread = threading.Thread(target=self._run, name="store-writer", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._thread is None:
            return
        self._q.put(None)
        self._thread.join(timeout_s)
        self._thread = None

    def submit(self, fn: WriteFn) -> Later:
        """Queue a write; the returned ``Later`` completes (on the writer thread) after its sync commit."""
        op = _Op(fn)
        if self._thread is None:
            raise Unavailable("record store writer is not running")
        if self._q.qsize() >= self.queue_max:
            raise Overloaded("record store write queue is full")
        self._q.put(op)
        return op.future

    def run(self, fn: Callable[[Txn], T], timeout_s: float = WRITE_TIMEOUT_S) -> T:
        """Submit and wait for the durable result (or the operation's own error)."""
        later = self.submit(fn)
        try:
            value: T = later.result(timeout_s)
        except RequestTimeout:
            later.drop()
            raise RequestTimeout("record store write not acknowledged in time") from None
        return value

    def _run(self) -> None:
        while True:
            op = self._q.get()
            if op is None:
                return
            batch = [op]
            stop = False
            q = self._q
            while len(batch) < self.max_batch and not q.empty():  # the one consumer: no queue.Empty raised
                nxt = q.get_nowait()
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            try:
                self._apply(batch)
            except Exception as exc:  # never let the writer die; every waiter gets an answer
                log.exception("record store batch failed")
                self._fail_all(batch, Unavailable(f"record store write failed: {exc}"))
            if stop:
                return

    def _apply(self, batch: list[_Op]) -> None:
        while True:
            try:
                results = self._attempt(batch)
            except _MapFull:
                if self.renv.grow():
                    log.info("record store map grown to %d bytes", self.renv.map_size)
                    continue
                if len(batch) > 1:  # at the limit: let the operations that still fit succeed alone
                    for op in batch:
                        self._apply([op])
                    return
                mb = self.renv.map_size // (1024 * 1024)
                msg = f"{MAP_FULL} ({mb} MiB, the configured maximum)"
                self._fail_all(batch, Unavailable(msg))
                return
            except lmdb.Error as exc:
                self._fail_all(batch, Unavailable(f"record store commit failed: {type(exc).__name__}: {exc}"))
                return
            self.stats.batches += 1
            self.stats.ops += len(batch)
            self.stats.max_batch = max(self.stats.max_batch, len(batch))
            with deferred.answering():  # the batch's replies leave together as it ends (not one send each)
                for op, (ok, value) in zip(batch, results, strict=True):
                    if not ok:
                        self.stats.failed_ops += 1
                    try:  # a consumer's callback (e.g. the bus encoding a reply) runs here, after the commit
                        if ok:
                            op.future.resolve(value)
                        else:
                            op.future.fail(value)
                    except Exception:
                        log.exception("record store: a write's completion callback failed")
            for hook in self.after_commit:
                try:
                    hook()
                except Exception:
                    log.exception("after-commit hook failed")
            return

    def _attempt(self, batch: list[_Op]) -> list[tuple[bool, Any]]:
        results: list[tuple[bool, Any]] = []
        env = self.renv.enter_write()
        try:
            txn = env.begin(write=True)
            try:
                for op in batch:
                    results.append(self._one(env, txn, op))
                txn.commit()
                tally(LMDB_WRITE_TXN, "group")
                tally(LMDB_WRITE_OP, None, len(batch))
            except lmdb.MapFullError:
                _abort(txn)
                raise _MapFull() from None
            except BaseException:
                _abort(txn)
                raise
        finally:
            self.renv.leave_write()
        return results

    @staticmethod
    def _one(env: lmdb.Environment, parent: Txn, op: _Op) -> tuple[bool, Any]:
        child = env.begin(write=True, parent=parent)
        try:
            value = op.fn(child)
        except lmdb.MapFullError:
            child.abort()
            raise
        except GeodeError as exc:
            child.abort()
            return False, exc
        except lmdb.Error as exc:  # e.g. a bad key/value size: this operation fails, the batch goes on
            child.abort()
            return False, Unavailable(f"record store rejected the write: {type(exc).__name__}: {exc}"[:500])
        except Exception as exc:
            child.abort()
            log.exception("record store operation failed")
            return False, GeodeError(f"{type(exc).__name__}: {exc}"[:500])
        child.commit()
        return True, value

    def _fail_all(self, batch: list[_Op], exc: GeodeError) -> None:
        self.stats.failed_batches += 1
        self.stats.last_error = exc.message
        for op in batch:
            if not op.future.done():
                try:
                    op.future.fail(exc)
                except Exception:
                    log.exception("record store: a write's completion callback failed")


def _abort(txn: Txn) -> None:
    try:
        txn.abort()
    except lmdb.Error:  # already released by a failed commit
        pass
