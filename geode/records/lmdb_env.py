"""The one LMDB environment of the record store: named sub-databases, key/value encoding, map growth.

Only the store process opens it for writing (LMDB allows one handle per process). Reads run in read
transactions on any thread; writes go through :class:`geode.records.writer.GroupWriter`. Another process may
open it read-only beside the writer (:meth:`RecordEnv.open_readonly`, the operator views of
:mod:`geode.records.reader`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeAlias

import lmdb
import msgpack

from geode.private_dir import tighten_file
from geode.protocol.codec import packb
from geode.protocol.errors import BadRequest, NotFound, Unavailable
from geode.records.settings import StoreConfig

# A transaction opened without ``buffers=True``: keys and values come back as ``bytes``.
Txn: TypeAlias = "lmdb.Transaction[bytes]"

MAX_KEY = 511  # LMDB's default maximum key size
SEP = b"\x00"

# Sub-databases (one per record type plus the indexes that keep lookups O(log n)).
DBS = (
    "meta",
    "ck_state",  # session -> checkpoint state record
    "ck_msgs",  # session \0 index(u64) -> message
    "ck_seqfp",  # session \0 seq(u64) -> digest of that save (idempotency, save_digest)
    "receipts",  # op_id -> receipt
    "rc_open",  # session \0 op_id -> step_id     (admitted | uncertain)
    "rc_owner",  # owner \0 op_id -> b""          (admitted only)
    "rc_done",  # updated_ns(u64) \0 op_id -> b""  (committed | reconciled, for pruning)
    "timeline",  # session \0 seq(u64) -> row
    "tl_ids",  # session \0 event_id -> seq(u64)
    "turns",  # turn_id -> turn record
    "turn_state",  # state \0 turn_id -> b""
    "turn_session",  # session \0 turn_id -> b"" (built at open for a store that predates it)
    "cursors",  # platform \0 account \0 channel -> position
    "dedupe",  # key -> {expires, token}
    "dd_exp",  # expires_ns(u64) \0 key -> b""
    "sj_jobs",  # job -> job definition (the scheduler's occurrence ledger: geode/records/schedule_*.py)
    "sj_cursor",  # job -> cursor (last decided instant, failures, paused/disabled)
    "sj_occ",  # job \0 instant UTC text | now:request -> occurrence row
    "sj_missed",  # job \0 first instant UTC text -> missed range
    "sj_open",  # job \0 slot -> holder, for occurrences not decided yet (claimed, due, delivering)
    "wh_rows",  # route \0 delivery -> intake row (the webhook intake table: geode/records/intake_*.py)
    "wh_dedupe",  # route \0 dedupe key -> its latest delivery (+ the stale-window counter, the attempt)
    "wh_turns",  # turn_id -> route \0 delivery
    "wh_pending",  # route \0 delivery -> b"", for intakes not done yet
    "wh_recv",  # received(µs, 20 digits) \0 route \0 delivery -> b"" (newest first)
    "wh_done",  # done(µs, 20 digits) \0 route \0 delivery -> b"" (retention)
    "wh_routes",  # route -> {open, states, window_s}: the queue counter and the counts
)


def key(*parts: str | int) -> bytes:
    """Encode a composite key: strings as UTF-8, ints as big-endian u64, joined by NUL."""
    out = []
    for p in parts:
        if type(p) is str:  # the common part first (a str is never an int)
            if "\x00" in p:
                raise BadRequest(f"key part {p[:40]!r} contains NUL")
            out.append(p.encode())
        elif isinstance(p, int):
            out.append(p.to_bytes(8, "big"))
        else:
            if "\x00" in p:
                raise BadRequest(f"key part {p[:40]!r} contains NUL")
            out.append(p.encode("utf-8"))
    k = SEP.join(out)
    if len(k) > MAX_KEY or not k:
        raise BadRequest(f"record key of {len(k)} bytes is empty or longer than {MAX_KEY}")
    return k


def prefix(*parts: str) -> bytes:
    return key(*parts) + SEP


def u64(b: bytes) -> int:
    return int.from_bytes(b[-8:], "big")


# one msgpack Packer per thread: ``msgpack.packb`` builds a Packer, with a 256 KiB buffer, for every call
# (issue 34: ~1.8 of a 300-byte message's 1.9 us; the writer packs each saved message, each state record,
# turn record and timeline row). A Packer resets its buffer after each pack, a failed one too.
pack = packb  # ``msgpack.packb(obj, use_bin_type=True)``: the same bytes, on this thread's Packer (codec's)


def unpack(b: bytes) -> Any:
    return msgpack.unpackb(b, raw=False, strict_map_key=False)


def scan_prefix(txn: Txn, db: Any, pfx: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, value) whose key starts with ``pfx``, in key order."""
    cur = txn.cursor(db=db)
    if not cur.set_range(pfx):
        return
    for k, v in cur:
        if not k.startswith(pfx):
            return
        yield k, v


class _SharedLock:
    """Many readers or one exclusive holder (map growth needs no live transaction in the process)."""

    def __init__(self) -> None:
        self._mu = threading.Lock()  # taken directly on the shared path (no Python-level Condition call)
        self._cond = threading.Condition(self._mu)
        self._readers = 0
        self._exclusive = False

    @contextmanager
    def shared(self) -> Iterator[None]:
        self.acquire_shared()
        try:
            yield
        finally:
            self.release_shared()

    def acquire_shared(self) -> None:
        with self._mu:
            while self._exclusive:
                self._cond.wait()
            self._readers += 1

    def release_shared(self) -> None:
        with self._mu:
            self._readers -= 1
            if not self._readers and self._exclusive:  # an exclusive holder waits for the readers to go
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive:
                self._cond.wait()
            self._exclusive = True
            while self._readers:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


class RecordEnv:
    """Open/close the environment, hand out sub-database handles, grow the map on demand."""

    def __init__(self, path: Path, config: StoreConfig | None = None) -> None:
        self.path = Path(path)
        self.config = config or StoreConfig()
        self.env: lmdb.Environment | None = None
        self._dbs: dict[str, Any] = {}
        self._lock = _SharedLock()
        self.map_size = self.config.map_size_mb * 1024 * 1024
        self.map_max = max(self.map_size, self.config.map_max_mb * 1024 * 1024)
        self.growths = 0
        self.stale_readers_cleared = 0

    def open(self) -> RecordEnv:
        try:
            self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not os.access(self.path, os.W_OK):
                raise PermissionError(f"{self.path} is not writable")
            env = lmdb.open(
                str(self.path),
                map_size=self.map_size,
                max_dbs=len(DBS) + 4,
                subdir=True,
                sync=True,
                metasync=True,
                writemap=False,
                map_async=False,
                max_readers=256,
                lock=True,
                readahead=False,
                mode=0o600,  # data.mdb and lock.mdb: the records are the user's alone
            )
            for name in ("data.mdb", "lock.mdb"):
                tighten_file(self.path / name)  # files created by an older version were 0644
        except (OSError, lmdb.Error) as exc:
            raise Unavailable(f"cannot open record store at {self.path}: {exc}") from exc
        try:
            self.stale_readers_cleared = env.reader_check()
            info = env.info()
            self.map_size = max(self.map_size, int(info["map_size"]))
            with env.begin(write=True) as txn:
                self._dbs = {name: env.open_db(name.encode(), txn=txn) for name in DBS}
        except lmdb.Error as exc:
            env.close()
            raise Unavailable(f"cannot initialise record store at {self.path}: {exc}") from exc
        self.env = env
        return self

    def open_readonly(self) -> RecordEnv:
        """Open an existing store read-only, beside its writer or with none (LMDB readers take a slot in
        ``lock.mdb`` and see committed snapshots): creates nothing, writes nothing. ``NotFound`` when no store
        was ever written here."""
        if not (self.path / "data.mdb").is_file():
            raise NotFound(f"no record store at {self.path} (nothing was recorded for this GEODE_HOME yet)")
        try:  # map_size=0: the size the writer last set (read from the file)
            env = lmdb.open(
                str(self.path),
                readonly=True,
                create=False,
                map_size=0,
                max_dbs=len(DBS) + 4,
                subdir=True,
                lock=True,
                readahead=False,
            )
        except lmdb.Error as exc:
            raise Unavailable(f"cannot read the record store at {self.path}: {exc}") from exc
        try:
            for name in DBS:  # each in a read transaction of its own (py-lmdb keeps the handle)
                try:
                    self._dbs[name] = env.open_db(name.encode(), create=False)
                except lmdb.NotFoundError:  # a store written by an older version: read what it has
                    continue
        except lmdb.Error as exc:
            env.close()
            raise Unavailable(f"cannot read the record store at {self.path}: {exc}") from exc
        self.env = env
        return self

    def close(self) -> None:
        if self.env is not None:
            with self._lock.exclusive():
                self.env.close()
            self.env = None

    def db(self, name: str) -> Any:
        return self._dbs[name]

    def _live(self) -> lmdb.Environment:
        if self.env is None:
            raise Unavailable("record store is closed")
        return self.env

    @contextmanager
    def read(self) -> Iterator[Txn]:
        """A read transaction (snapshot) usable on the calling thread."""
        with self._lock.shared():
            env = self._live()
            try:
                txn = env.begin(write=False)
            except lmdb.MapResizedError:  # a read-only handle: the writer grew the map since we opened
                env.set_mapsize(0)
                txn = env.begin(write=False)
            with txn:
                yield txn

    @contextmanager
    def write_scope(self) -> Iterator[lmdb.Environment]:
        """Held by the writer for one batch so growth never races with a live write transaction."""
        with self._lock.shared():
            yield self._live()

    def enter_write(self) -> lmdb.Environment:
        """:meth:`write_scope` without a context manager, for the group writer's batch (pair it with
        :meth:`leave_write` in a ``finally``): two generator frames fewer per commit."""
        self._lock.acquire_shared()
        try:
            return self._live()
        except BaseException:
            self._lock.release_shared()
            raise

    def leave_write(self) -> None:
        self._lock.release_shared()

    def grow(self) -> bool:
        """Double the map (bounded by ``map_max``). Caller must hold no transaction. False at the limit."""
        if self.map_size >= self.map_max:
            return False
        new = min(self.map_size * 2, self.map_max)
        with self._lock.exclusive():
            self._live().set_mapsize(new)
        self.map_size = new
        self.growths += 1
        return True

    def stats(self) -> dict[str, Any]:
        env = self._live()
        info = env.info()
        with self.read() as txn:
            entries = {name: txn.stat(self._dbs[name])["entries"] for name in DBS}
        st = env.stat()
        used = (info["last_pgno"] + 1) * st["psize"]
        return {
            "path": str(self.path),
            "map_size": self.map_size,
            "map_max": self.map_max,
            "used_bytes": used,
            "growths": self.growths,
            "stale_readers_cleared": self.stale_readers_cleared,
            "entries": entries,
        }
