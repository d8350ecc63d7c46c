"""Timeline rows for every call and outcome (denials included), redacted; personal-data arguments omitted.

The rows queued together go to the store in one request (``append_timelines``). Both rows of a read-only
call (no effect, no receipt) are held: they wait up to ``HOLD_S`` (from when the oldest queued row was
queued) so that they go together, with the rows of the calls made meanwhile: one store round trip per
``HOLD_S`` of read-only calls, not one per call, the same rows in the same order. A held row does not wake
the writer unless it sleeps with nothing queued; the writer times itself (after a request it waits
``HOLD_S`` for more rows before it sleeps). Any other row (a call with an effect, a denial) wakes the writer
at once and goes with every row queued before it; ``flush`` and ``close`` send what is queued at once."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from typing import Any

from geode.metrics import record as metrics
from geode.records.client import RecordClient
from geode.records.models import TimelineEvent
from geode.redaction import redact, redact_text
from geode.tools.receipts import OMITTED
from geode.tools.spec import DataClass, ToolCall, ToolContext, ToolResult, ToolSpec
from geode.tools.structured_text import recarry

log = logging.getLogger(__name__)
SUMMARY_CHARS = 500
MAX_QUEUED = 10_000
OUTCOMES = {"tool.denied": "denied", "tool.replayed": "replayed", "tool.completed": "ok"}
HOLD_S = 0.05  # how long a read-only call's rows may wait for the rows that go with them
BATCH = 64  # rows per store request at most (geode.protocol.store.MAX_APPEND_MANY)


def shown(call: ToolCall, spec: ToolSpec | None) -> Any:
    """A call's arguments as its rows show them: redacted, or omitted for a personal-data tool."""
    if spec is not None and spec.policy.data_class is DataClass.PERSONAL:
        return OMITTED
    return redact(call.input)


def _ok(result: ToolResult) -> str:
    return "error" if result.is_error else "ok"


def _summary(content: Any) -> Any:
    """A result's bounded, redacted copy for its timeline row."""
    return redact(content, max_str=SUMMARY_CHARS, max_items=16)


class ToolTimeline:
    """Observation only: rows are appended in order by one background writer, off the call's critical path.

    A full queue makes the caller write inline (back-pressure, never a silent drop); a failed append is
    logged and never changes the call's outcome. ``flush()`` waits for queued rows (tests, shutdown).
    """

    def __init__(self, records: RecordClient | None, *, background: bool = True) -> None:
        self._records = records
        self._queue: deque[tuple[TimelineEvent, bool]] = deque()  # (row, held for the next row)
        self._since = 0.0  # when the oldest queued row was queued (monotonic)
        self._cv = threading.Condition()
        self._pending = 0
        self._closed = False
        self._idle = False  # the writer sleeps with nothing queued (no timer running)
        self._urgent = False  # a row that goes at once is queued (the held ones before it go with it)
        self.failures = 0
        # unique per row (a retried call writes new rows; the store's own retries reuse the same event)
        self._seq = itertools.count(int(time.time() * 1000) % 10**9)
        self._thread: threading.Thread | None = None
        if records is not None and background:
            self._thread = threading.Thread(target=self._drain, name="tool-timeline", daemon=True)
            self._thread.start()

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Block until every queued row was appended (or failed); False on timeout."""
        end = time.monotonic() + timeout_s
        with self._cv:
            self._urgent = True  # held rows go now
            self._cv.notify_all()
            while self._pending:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def close(self, timeout_s: float = 2.0) -> None:
        self.flush(timeout_s)
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    def _drain(self) -> None:
        linger = False  # after a request: wait HOLD_S for more rows before sleeping untimed
        while True:
            with self._cv:
                while not self._queue and not self._closed:
                    if linger:
                        linger = False
                        self._cv.wait(HOLD_S)
                        continue
                    self._idle = True
                    self._cv.wait()
                    self._idle = False
                if not self._queue:
                    return
                while not self._urgent and not self._closed:  # held rows wait for the rows of HOLD_S
                    left = self._since + HOLD_S - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(left)
                batch = [self._queue.popleft()[0] for _ in range(min(BATCH, len(self._queue)))]
                self._urgent = bool(self._queue)  # more than a batch: the rest goes next, at once
                self._since = time.monotonic()
            self._append_all(batch)
            with self._cv:
                self._pending -= len(batch)
                self._cv.notify_all()
            linger = True

    def _append_all(self, batch: list[TimelineEvent]) -> None:
        many = getattr(self._records, "append_timelines", None)  # a StoreClient has it, an engine not
        if len(batch) == 1 or many is None:
            for event in batch:
                self._append(event)
            return
        try:
            errors = many(batch)
        except Exception as exc:
            self.failures += len(batch)
            log.warning("timeline append of %d rows failed: %s", len(batch), redact_text(str(exc), 500))
            return
        for error in errors:
            self.failures += 1
            log.warning("timeline append failed: %s", redact_text(error, 500))

    def _append(self, event: TimelineEvent) -> None:
        try:
            self._records.append_timeline(event)  # type: ignore[union-attr]
        except Exception as exc:
            self.failures += 1
            log.warning("timeline append %s failed: %s", event.event_id, redact_text(str(exc), 500))

    def write(
        self,
        kind: str,
        ctx: ToolContext,
        call: ToolCall,
        spec: ToolSpec | None,
        result: ToolResult | None = None,
        *,
        hold: bool = False,
        arguments: Any = None,
        **fields: Any,
    ) -> None:
        """Queue one row (``hold``: it may wait up to ``HOLD_S`` for the rows that go with it).
        ``arguments``: ``shown(call, spec)`` of this call when the caller has it already (a call's rows)."""
        if kind in OUTCOMES:  # one count per outcome row (a call is denied, replayed or completed once)
            outcome = OUTCOMES[kind] if kind != "tool.completed" or result is None else _ok(result)
            metrics.tool_call(call.name, spec is not None, outcome)
        if self._records is None:
            return
        personal = spec is not None and spec.policy.data_class is DataClass.PERSONAL
        payload: dict[str, Any] = {
            "tool_name": call.name,
            "tool_use_id": call.id,
            "operation_id": ctx.operation_id,
            "turn_id": ctx.turn_id,
            "step_id": ctx.step_id,
            "mode": ctx.mode,
            "arguments": shown(call, spec) if arguments is None else arguments,
            **fields,
        }
        if result is not None:
            payload["status"] = "error" if result.is_error else "ok"
            payload["error_type"] = result.error_type
            payload["executed"] = result.executed
            payload["summary"] = (
                OMITTED if personal else recarry(result.content, _summary)  # a carried text stays text
            )
        key = ctx.operation_id or f"{ctx.step_id}:{call.id}"
        event = TimelineEvent(  # our own row (the store validates it): pydantic's core builds it ~2x faster
            # than model_construct's Python loop over the fields
            session_id=ctx.session_id,
            event_id=f"{key}:{kind}:{next(self._seq)}",
            kind=kind,
            ts=time.time(),
            payload=payload,
        )
        with self._cv:
            if self._thread is not None and not self._closed and len(self._queue) < MAX_QUEUED:
                if not self._queue:
                    self._since = time.monotonic()
                self._queue.append((event, hold))
                self._pending += 1
                if not hold or self._idle:  # a held row wakes only a writer asleep with nothing queued
                    self._urgent = self._urgent or not hold
                    self._idle = False
                    self._cv.notify_all()
                return
        self._append(event)
