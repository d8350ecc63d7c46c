"""An ApprovalChannel that forwards prompts through lanes (``lanes.approval``) to the turn's origin."""

from __future__ import annotations

import itertools
import uuid

from geode.protocol import lanes as lanes_msg
from geode.protocol.transport import Transport
from geode.tools.always_scope import covers
from geode.tools.approvals import APPROVAL_TIMEOUT_S
from geode.tools.spec import SafetyPolicy, ToolContext

_seq = itertools.count(1)
# a denial nobody made, by lanes' reason → the gate's answer (never reported as "User denied")
NOT_A_PERSON = {
    "timeout": "timeout",
    "disconnect": "disconnected",
    "worker_died": "disconnected",
    "cancelled": "cancelled",
    "turn_ended": "cancelled",
    "no_origin": "no_origin",
    "no_terminal": "no_terminal",  # the client had no one to ask (`geode ask` without a terminal)
    "duplicate_or_full": "no_origin",
    "unknown": "no_origin",
}


class LanesApprovalChannel:
    """Lanes relays to the CLI and answers ``n`` on timeout or disconnect; any error here denies too."""

    def __init__(
        self,
        transport: Transport,
        target: str = "lanes",
        *,
        timeout_s: float = APPROVAL_TIMEOUT_S,
        origin_timeouts: dict[str, float] | None = None,
    ):
        self.transport = transport
        self.target = target
        self.timeout_s = timeout_s
        # per origin, e.g. {"messengers": [messengers] approval_timeout_s}; the gate must wait at least that
        self.origin_timeouts = dict(origin_timeouts or {})

    def request(self, ctx: ToolContext, tool_name: str, detail: str, safety: SafetyPolicy) -> str:
        ask = lanes_msg.ApprovalAsk(
            approval_id=f"{ctx.operation_id or ctx.step_id}:{next(_seq)}:{uuid.uuid4().hex[:8]}"[-128:],
            session_id=ctx.session_id,
            turn_id=ctx.turn_id,
            tool_name=tool_name[:128],
            detail=detail,  # whole: the gate denies a request too large to show without asking
            safety_level=f"{safety.effect.value}/{safety.data_class.value}"[:32],
            always_covers=covers(tool_name, safety),
            timeout_s=self.origin_timeouts.get(ctx.origin, self.timeout_s),
        )
        reply = self.transport.call(
            self.target, lanes_msg.APPROVAL, ask, session=ctx.session_id, timeout_s=ask.timeout_s + 5
        )
        out = lanes_msg.ApprovalDecision.model_validate(reply)
        if out.decision == "n" and out.reason in NOT_A_PERSON:
            return NOT_A_PERSON[out.reason]
        return f"{out.decision}: {out.note}" if out.note else str(out.decision)  # "n: why" (see approvals)
