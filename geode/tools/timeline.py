"""Timeline rows for every call and outcome (denials included), redacted; personal-data arguments omitted."""

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

log = logging.getLogger(__name__)
SUMMARY_CHARS = 500
MAX_QUEUED = 10_000
OUTCOMES = {"tool.denied": "denied", "tool.replayed": "replayed", "tool.completed": "ok"}


def _ok(result: ToolResult) -> str:
    return "error" if result.is_error else "ok"


class ToolTimeline:
    """Observation only: rows are appended in order by one background writer, off the call's critical path.

    A full queue makes the caller write inline (back-pressure, never a silent drop); a failed append is
    logged and never changes the call's outcome. ``flush()`` waits for queued rows (tests, shutdown).
    """

    def __init__(self, records: RecordClient | None, *, background: bool = True) -> None:
        self._records = records
        self._queue: deque[TimelineEvent] = deque()
        self._cv = threading.Condition()
        self._pending = 0
        self._closed = False
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
        while True:
            with self._cv:
                while not self._queue and not self._closed:
                    self._cv.wait()
                if not self._queue:
                    return
                event = self._queue.popleft()
            self._append(event)
            with self._cv:
                self._pending -= 1
                self._cv.notify_all()

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
        **fields: Any,
    ) -> None:
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
            "arguments": OMITTED if personal else redact(call.input),
            **fields,
        }
        if result is not None:
            payload["status"] = "error" if result.is_error else "ok"
            payload["error_type"] = result.error_type
            payload["executed"] = result.executed
            payload["summary"] = (
                OMITTED if personal else redact(result.content, max_str=SUMMARY_CHARS, max_items=16)
            )
        key = ctx.operation_id or f"{ctx.step_id}:{call.id}"
        event = TimelineEvent(
            session_id=ctx.session_id,
            event_id=f"{key}:{kind}:{next(self._seq)}",
            kind=kind,
            ts=time.time(),
            payload=payload,
        )
        with self._cv:
            if self._thread is not None and not self._closed and len(self._queue) < MAX_QUEUED:
                self._queue.append(event)
                self._pending += 1
                self._cv.notify_all()
                return
        self._append(event)
