"""The delegate service behind ``delegate_task``: a child turn submitted through lanes, its answer the result.

The child's origin is this service (lanes streams the child's events here); an approval the child asks for
is relayed as an approval of the *parent's* turn, so it reaches the person the parent's prompts reach.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from geode.config_schema import GeodeConfig
from geode.protocol import lanes as lanes_msg
from geode.protocol.errors import GeodeError
from geode.protocol.transport import Transport
from geode.sessions.modes import default_denylist
from geode.sessions.transcript import hook_transcript_path
from geode.tools.handlers import ToolFailure
from geode.tools.settings import DELEGATE_MAX_TIMEOUT_S as MAX_TIMEOUT_S
from geode.tools.spec import ToolContext, ToolSpec

log = logging.getLogger(__name__)

DELEGATE_TOOL = "delegate_task"
DEFAULT_TIMEOUT_S = 300.0
RETURN_MARGIN_S = 2.0  # the handler answers this long before its own deadline (a clean, receipted result)
MIN_CHILD_BUDGET_S = 5.0
MAX_DEPTH = 1


@dataclass(frozen=True)
class DelegateLimits:
    """``[tools.delegate]``: the cap on a child's time budget; how often its turn record is polled, how long
    before its deadline the call answers, the least budget worth starting a child with."""

    max_timeout_s: float = MAX_TIMEOUT_S
    poll_s: float = 1.0
    margin_s: float = RETURN_MARGIN_S
    min_budget_s: float = MIN_CHILD_BUDGET_S

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None) -> DelegateLimits:
        sec = dict(section or {})
        return cls(max_timeout_s=float(sec.get("max_timeout_s", MAX_TIMEOUT_S)))


def child_ids(operation_id: str) -> tuple[str, str]:
    """(session id, turn id) of the child of one delegate_task call: the same operation → the same child."""
    h = hashlib.sha256(f"delegate\x1f{operation_id}".encode()).hexdigest()[:20]
    return f"s-sub-{h}", f"t-sub-{h}"


def child_denylist(
    parent_settings: Mapping[str, Any],
    mode: str,
    specs: Iterable[ToolSpec],
    config: GeodeConfig,
) -> list[str]:
    """The parent's denylist (its mode's default when it had none) plus every tool sub-agents may not use
    (delegate_task among them): never looser than the parent's."""
    specs = list(specs)
    given = parent_settings.get("denied_tools")
    if given is None:
        parent = set(default_denylist(mode, config=config, plan_tools=specs))
    else:
        parent = {str(n) for n in given}
    return sorted(parent | {DELEGATE_TOOL} | {s.name for s in specs if not s.policy.allow_subagents})


@dataclass
class _Child:
    parent: ToolContext
    done: threading.Event = field(default_factory=threading.Event)
    outcome: dict[str, Any] | None = None


class LanesDelegate:
    """Runs a task as a child turn (own session, own budget, stricter denylist) and waits for its answer."""

    def __init__(
        self,
        transport: Transport,
        *,
        origin: str,
        specs: Iterable[ToolSpec] = (),
        config: GeodeConfig | None = None,
        limits: DelegateLimits = DelegateLimits(),
        target: str = "lanes",
        hooks: Callable[[], Any] | None = None,
    ) -> None:
        self.transport = transport
        self.origin = origin  # the peer name lanes streams child turns to (this process)
        self.specs = tuple(specs)
        self.config = config or GeodeConfig()  # the typed snapshot ([daemon]/[gateway] computer use)
        self.limits = limits
        self.target = target
        self.hooks = hooks  # the executor's current HookRunner (SubagentStart / SubagentStop)
        self._mu = threading.Lock()
        self._children: dict[str, _Child] = {}  # child turn id → the waiting parent call

    # --- the handler's side -------------------------------------------------------------------------------
    def __call__(
        self,
        task: str,
        *,
        parent: ToolContext,
        timeout_s: float,
        requested_s: float | None = None,
        cancel: threading.Event | None = None,
    ) -> dict[str, Any]:
        """``timeout_s``: what the handler has left (the parent's remaining budget already applied);
        ``requested_s``: the tool's own argument. Returns {session_id, turn_id, text, termination_reason}."""
        cancel = cancel or threading.Event()
        lim = self.limits
        wait_s = timeout_s - lim.margin_s
        budget = min(requested_s or DEFAULT_TIMEOUT_S, lim.max_timeout_s, wait_s - lim.margin_s)
        if budget < lim.min_budget_s:
            raise ToolFailure(
                f"Not enough time left in this turn to delegate ({max(0.0, timeout_s):.0f}s).",
                "tool_timeout",
            )
        settings = self._parent_settings(parent)
        depth = int(settings.get("subagent_depth") or 0) + parent.subagent_depth
        if depth >= MAX_DEPTH:
            raise ToolFailure("Sub-agents cannot delegate further (depth 1).", "tool_policy_denied")
        session_id, turn_id = child_ids(parent.operation_id)
        child = self._child_settings(settings, parent, session_id, budget, depth + 1)
        waiter = _Child(parent)
        with self._mu:
            self._children[turn_id] = waiter
        try:
            sub = lanes_msg.Submit(
                turn_id=turn_id,
                session_id=session_id,
                mode=parent.mode,
                origin=self.origin,
                input={"text": task},
                settings=child,
            )
            try:
                self.transport.call(self.target, lanes_msg.SUBMIT, sub, session=session_id, timeout_s=10)
            except GeodeError as exc:
                raise ToolFailure(
                    f"The sub-agent's turn could not be queued: {exc}", "tool_unavailable"
                ) from None
            self._observe("SubagentStart", parent, session_id, {})
            try:
                outcome = self._wait(waiter, turn_id, session_id, wait_s, cancel)
            finally:
                stop = {"stop_hook_active": False, "agent_transcript_path": hook_transcript_path(session_id)}
                self._observe("SubagentStop", parent, session_id, stop)
        finally:
            with self._mu:
                self._children.pop(turn_id, None)
        return {
            "session_id": session_id,
            "turn_id": turn_id,
            "text": str(outcome.get("text") or outcome.get("pending_text") or ""),
            "termination_reason": str(outcome.get("termination_reason", "")),
            **({"error": outcome["error"]} if outcome.get("error") else {}),
        }

    def _observe(self, event: str, parent: ToolContext, child_session: str, extra: dict[str, Any]) -> None:
        """Claude Code's SubagentStart / SubagentStop (observation) in the parent's session."""
        runner = self.hooks() if self.hooks is not None else None
        if runner is None:
            return
        payload = {"agent_id": child_session, "agent_type": DELEGATE_TOOL, **extra}
        corr = {"session_id": parent.session_id, "turn_id": parent.turn_id, "cwd": parent.workspace}
        try:
            runner.run(event, payload, corr)
        except Exception as exc:  # observation only
            log.debug("%s hooks not run: %s", event, exc)

    def _parent_settings(self, parent: ToolContext) -> dict[str, Any]:
        """The parent turn's session spec, from its durable turn record (lanes.turn)."""
        try:
            rec = self.transport.call(
                self.target, lanes_msg.TURN, lanes_msg.TurnQuery(turn_id=parent.turn_id), timeout_s=10
            )
        except GeodeError as exc:
            raise ToolFailure(
                f"The parent turn's settings are unreadable: {exc}", "tool_unavailable"
            ) from None
        settings = rec.get("settings") if isinstance(rec, dict) else None  # a TurnRecord's (older: migrated)
        return dict(settings) if isinstance(settings, dict) else {}

    def _child_settings(
        self, parent: dict[str, Any], ctx: ToolContext, session_id: str, budget: float, depth: int
    ) -> dict[str, Any]:
        denied = child_denylist(parent, ctx.mode, self.specs, self.config)
        out = {k: v for k, v in parent.items() if k not in ("plan", "granted_tools")}  # grants: not a child's
        visible = [str(n) for n in parent.get("visible_tools") or () if str(n) not in denied]
        out.update(
            session_id=session_id,
            mode=ctx.mode,
            workspace=parent.get("workspace") or ctx.workspace,
            time_budget_s=round(budget, 3),
            denied_tools=denied,
            visible_tools=visible,
            origin=self.origin,
            skip_permissions=bool(parent.get("skip_permissions")) or ctx.skip_permissions,
            subagent_depth=depth,
            parent_session_id=ctx.session_id,
            parent_turn_id=ctx.turn_id,
        )
        if ctx.model and not out.get("model"):
            out["model"] = ctx.model
        return out

    def _wait(
        self, waiter: _Child, turn_id: str, session_id: str, wait_s: float, cancel: threading.Event
    ) -> dict[str, Any]:
        """Until the child's turn is done (stream event or its record), the parent is cancelled, or time
        runs out (then the child is cancelled too). Bounded by ``wait_s``."""
        end = time.monotonic() + wait_s
        while True:
            left = end - time.monotonic()
            if cancel.is_set():
                self._cancel(turn_id, "parent turn cancelled")
                raise ToolFailure(
                    f"Cancelled with the parent turn; the sub-agent's turn {turn_id} was cancelled too.",
                    "tool_cancelled",
                    cancelled=True,
                    session_id=session_id,
                )
            if left <= 0:
                self._cancel(turn_id, "delegate_task timed out")
                raise ToolFailure(
                    f"The sub-agent did not finish within {wait_s:.0f}s; its turn {turn_id} was cancelled.",
                    "tool_timeout",
                    session_id=session_id,
                )
            # wake on the stream's turn_done or a cancel, else poll the durable record
            step = min(self.limits.poll_s, left)
            deadline = time.monotonic() + step
            while time.monotonic() < deadline and not cancel.is_set() and not waiter.done.is_set():
                waiter.done.wait(min(0.1, max(0.0, deadline - time.monotonic())))
            if waiter.outcome is not None:
                return waiter.outcome
            outcome = self._outcome(turn_id)
            if outcome is not None:
                return outcome

    def _outcome(self, turn_id: str) -> dict[str, Any] | None:
        try:
            rec = self.transport.call(
                self.target, lanes_msg.TURN, lanes_msg.TurnQuery(turn_id=turn_id), timeout_s=5
            )
        except GeodeError as exc:
            log.debug("child turn %s unreadable: %s", turn_id, exc)
            return None
        if isinstance(rec, dict) and rec.get("state") == "done":
            return dict(rec.get("outcome") or {})
        return None

    def _cancel(self, turn_id: str, reason: str) -> None:
        try:
            self.transport.call(
                self.target, lanes_msg.CANCEL, lanes_msg.Cancel(turn_id=turn_id, reason=reason), timeout_s=5
            )
        except GeodeError as exc:
            log.warning("cannot cancel sub-agent turn %s: %s", turn_id, exc)

    # --- the origin's side: the child's stream ------------------------------------------------------------
    def on_event(self, ev: lanes_msg.StreamEvent) -> None:
        """A child turn's stream event (this service is the child's origin)."""
        if ev.kind == lanes_msg.TURN_DONE:
            with self._mu:
                waiter = self._children.get(ev.turn_id)
            if waiter is not None:
                result = ev.data.get("result")
                waiter.outcome = dict(result) if isinstance(result, dict) else {}
                waiter.done.set()
        elif ev.kind == lanes_msg.APPROVAL_REQUEST:
            threading.Thread(
                target=self._relay_approval, args=(ev,), name="delegate-approval", daemon=True
            ).start()

    def _relay_approval(self, ev: lanes_msg.StreamEvent) -> None:
        """Ask the parent turn's person (an approval of the parent's turn); answer the child's ask with it."""
        try:
            ask = lanes_msg.ApprovalAsk.model_validate(ev.data)
        except ValueError:
            log.warning("malformed approval request from sub-agent turn %s", ev.turn_id)
            return
        with self._mu:
            waiter = self._children.get(ev.turn_id)
        decision, note = "n", "the sub-agent's parent call is no longer waiting"
        if waiter is not None:
            p = waiter.parent
            try:  # a request too large for an approval message is a ValueError: denied, said why
                relayed = lanes_msg.ApprovalAsk(
                    approval_id=f"sub:{ask.approval_id}"[:128],
                    session_id=p.session_id,
                    turn_id=p.turn_id,
                    tool_name=ask.tool_name,
                    detail=f"[sub-agent {ev.session_id}] {ask.detail}",
                    safety_level=ask.safety_level,
                    always_covers=ask.always_covers,
                    timeout_s=max(1.0, ask.timeout_s - RETURN_MARGIN_S),
                )
                reply = self.transport.call(
                    self.target,
                    lanes_msg.APPROVAL,
                    relayed,
                    session=p.session_id,
                    timeout_s=ask.timeout_s + 5,
                )
                got = lanes_msg.ApprovalDecision.model_validate(reply)
                decision, note = got.decision, got.note
            except (GeodeError, ValueError) as exc:
                note = f"the approval could not reach the parent's session: {exc}"[:1024]
        answer = lanes_msg.ApprovalReply(approval_id=ask.approval_id, decision=decision, note=note[:1024])  # type: ignore[arg-type]
        try:
            self.transport.call(
                self.target, lanes_msg.APPROVAL_REPLY, answer, session=ev.session_id, timeout_s=5
            )
        except GeodeError as exc:
            log.warning("cannot answer the sub-agent's approval %s: %s", ask.approval_id, exc)
