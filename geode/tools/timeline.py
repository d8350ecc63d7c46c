"""Timeline rows for every call and outcome (denials included), redacted; personal-data arguments omitted."""

from __future__ import annotations

import logging
import time
from typing import Any

from geode.records.client import RecordClient
from geode.records.models import TimelineEvent
from geode.redaction import redact
from geode.tools.receipts import OMITTED
from geode.tools.spec import DataClass, ToolCall, ToolContext, ToolResult, ToolSpec

log = logging.getLogger(__name__)
SUMMARY_CHARS = 500


class ToolTimeline:
    """Observation only: a failed append is logged and never changes the call's outcome."""

    def __init__(self, records: RecordClient | None) -> None:
        self._records = records

    def write(
        self,
        kind: str,
        ctx: ToolContext,
        call: ToolCall,
        spec: ToolSpec | None,
        result: ToolResult | None = None,
        **fields: Any,
    ) -> None:
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
            session_id=ctx.session_id, event_id=f"{key}:{kind}", kind=kind, ts=time.time(), payload=payload
        )
        try:
            self._records.append_timeline(event)
        except Exception as exc:
            log.warning("timeline append %s failed: %s", event.event_id, exc)
