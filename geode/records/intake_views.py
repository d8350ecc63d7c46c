"""Reading the webhook intake table: a row, the row of a turn, the pending rows a page at a time (what a
starting webhooks child re-submits), the newest rows, per-route counts, and the done rows retention may drop.
Reads take any read transaction (the store's, or a read-only reader's on a store that predates the table)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from geode.records.intake_models import IntakeCounts, IntakePage, IntakeRow
from geode.records.lmdb_env import RecordEnv, Txn, key, unpack

ROWS, DEDUPE, TURNS, PENDING = "wh_rows", "wh_dedupe", "wh_turns", "wh_pending"
RECV, DONE, ROUTES = "wh_recv", "wh_done", "wh_routes"
NAMES = (ROWS, DEDUPE, TURNS, PENDING, RECV, DONE, ROUTES)
PAGE_ROWS = 200
PAGE_BYTES = 640 * 1024  # a page of rows (bodies base64) stays inside one 1 MiB frame
Dbs = dict[str, Any]  # sub-database name -> handle (absent in a store written before the table existed)


def handles(renv: RecordEnv) -> Dbs:
    out: Dbs = {}
    for name in NAMES:
        try:
            out[name] = renv.db(name)
        except KeyError:
            pass
    return out


def row(txn: Txn, dbs: Dbs, route: str, delivery_id: str) -> IntakeRow | None:
    if ROWS not in dbs:
        return None
    raw = txn.get(key(route, delivery_id), db=dbs[ROWS])
    return IntakeRow.model_validate(unpack(raw)) if raw else None


def by_turn(txn: Txn, dbs: Dbs, turn_id: str) -> IntakeRow | None:
    if TURNS not in dbs:
        return None
    rk = txn.get(key(turn_id), db=dbs[TURNS])
    raw = txn.get(rk, db=dbs[ROWS]) if rk else None
    return IntakeRow.model_validate(unpack(raw)) if raw else None


def route_meta(txn: Txn, dbs: Dbs, route: str) -> dict[str, Any]:
    """A route's counters: ``open`` (recorded|submitted), ``states`` ({state: n}), ``window_s`` (longest)."""
    raw = txn.get(key(route), db=dbs[ROUTES]) if ROUTES in dbs else None
    meta: dict[str, Any] = unpack(raw) if raw else {}
    return {
        "open": int(meta.get("open", 0)),
        "states": dict(meta.get("states", {})),
        "window_s": meta.get("window_s"),
    }


def pending(txn: Txn, dbs: Dbs, after: str) -> IntakePage:
    """Rows not done yet after the key ``after`` (hex; "" = from the start), in key order, bodies included."""
    page = IntakePage()
    if PENDING not in dbs:
        return page
    cur = txn.cursor(db=dbs[PENDING])
    start = bytes.fromhex(after) if after else b""
    if not (cur.set_range(start + b"\x00") if start else cur.first()):
        return page
    size, prev = 0, b""
    for k in cur.iternext(keys=True, values=False):
        raw = txn.get(k, db=dbs[ROWS])
        if raw is None:
            continue
        if len(page.rows) >= PAGE_ROWS or (size + len(raw) * 4 // 3 > PAGE_BYTES and page.rows):
            page.next_after = prev.hex()
            return page
        size += len(raw) * 4 // 3
        page.rows.append(IntakeRow.model_validate(unpack(raw)))
        prev = k
    return page


def recent(txn: Txn, dbs: Dbs, route: str | None, limit: int, with_body: bool) -> list[IntakeRow]:
    """The newest rows (of ``route``, or of every route), newest first; bodies left out unless asked."""
    out: list[IntakeRow] = []
    if RECV not in dbs:
        return out
    cur = txn.cursor(db=dbs[RECV])
    if not cur.last():
        return out
    for k in cur.iterprev(keys=True, values=False):
        _at, r, delivery_id = k.decode().split("\x00")
        if route is not None and r != route:
            continue
        found = row(txn, dbs, r, delivery_id)
        if found is None:
            continue
        out.append(found if with_body else found.model_copy(update={"body": b""}))
        if len(out) >= limit:
            break
    return out


def counts(txn: Txn, dbs: Dbs) -> IntakeCounts:
    out = IntakeCounts()
    if ROUTES not in dbs:
        return out
    for k, v in txn.cursor(db=dbs[ROUTES]):
        meta = unpack(v)
        route = k.decode()
        out.routes[route] = {s: n for s, n in meta.get("states", {}).items() if n}
        out.open[route] = int(meta.get("open", 0))
    return out


def routes_holding(txn: Txn, dbs: Dbs, delivery_id: str) -> list[str]:
    """Every route with a row named ``delivery_id``."""
    if ROWS not in dbs:
        return []
    tail = b"\x00" + delivery_id.encode()
    cur = txn.cursor(db=dbs[ROWS])
    return [k[: -len(tail)].decode() for k in cur.iternext(keys=True, values=False) if k.endswith(tail)]


def done_before(txn: Txn, dbs: Dbs, cutoff: str) -> Iterator[tuple[bytes, bytes]]:
    """The done-index entries finished before ``cutoff`` (a :func:`utc_key`), oldest first."""
    cur = txn.cursor(db=dbs[DONE])
    if not cur.first():
        return
    for k, v in cur:
        if k.split(b"\x00", 1)[0].decode() >= cutoff:
            return
        yield k, v
