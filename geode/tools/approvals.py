"""Approvals: PermissionRequest hooks, then one human prompt at a time per session; silence means no."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from geode.config_schema import GeodeConfig
from geode.hooks.events import HookEvent
from geode.hooks.runner import HookRunner
from geode.protocol.lanes import APPROVAL_DETAIL_MAX
from geode.sessions.modes import SessionMode, operator_granted
from geode.tools.locks import KeyedLocks
from geode.tools.policy import COMPUTER_TOOLS, computer_allowed_in_daemon, is_headless
from geode.tools.spec import ApprovalMode, DataClass, SafetyPolicy, ToolContext, ToolSpec

log = logging.getLogger(__name__)
APPROVAL_TIMEOUT_S = 120.0
MAX_SESSIONS = 1024
# a channel answer besides y / n / a: a denial nobody made (reported as itself, never "User denied")
# A DAEMON turn from a chat binding asks in its chat (the messengers child, the turn's origin): the binding's
# approvers answer there, and a binding without approvers denies at once (DESIGN §6).
CHAT_ORIGIN = "messengers"
CHANNEL_DENIALS = ("timeout", "disconnected", "cancelled", "no_origin", "no_terminal")


def too_large(tool_name: str, chars: int) -> str:
    return (
        f"'{tool_name}' denied without asking: its request is {chars} characters, more than an approval "
        f"prompt carries whole ({APPROVAL_DETAIL_MAX}). Split it into smaller calls."
    )


def ways_to_allow(tool_name: str) -> str:
    """How an operator lets ``tool_name`` run where nobody can be asked (said to the model and the user)."""
    hook = f'a PermissionRequest hook that allows it ([[hooks.PermissionRequest]] matcher = "{tool_name}")'
    if tool_name.startswith("mcp__") and tool_name.count("__") >= 2:
        server, tool = tool_name.removeprefix("mcp__").split("__", 1)
        return (
            f'{hook}, read_only_tools = ["{tool}"] in [mcp.servers.{server}] of the global config (a '
            "read-only tool; the server's own readOnlyHint is not enough), or --dangerously-skip-permissions"
        )
    return f"{hook}, or --dangerously-skip-permissions"


def no_one_to_ask(tool_name: str) -> str:
    """The denial of a call that needed approval when nobody could be asked (not a person's "no")."""
    return (
        f"'{tool_name}' needs approval and nobody could be asked: the client has no terminal to ask on "
        f"(geode ask without a terminal, or with --json), so it was not run. No user saw or denied it. Do "
        f"not retry it in this turn; tell the user. To allow it: {ways_to_allow(tool_name)}."
    )


def no_one_in_automation(tool_name: str) -> str:
    """The denial of an AUTOMATION call that needed approval: nobody is asked, ever (not a person's "no")."""
    return (
        f"denied: no one to approve in AUTOMATION mode ('{tool_name}' needs approval; a scheduled job asks "
        f"nobody), so it was not run. Do not retry it in this turn. To allow it: name it in the job's "
        "allowed_tools (a job the operator defines) or a PermissionRequest hook that allows it "
        f'([[hooks.PermissionRequest]] matcher = "{tool_name}").'
    )


def asks_in_channel(ctx: ToolContext) -> bool:
    """A DAEMON-mode call whose turn came from a bound chat: approvals are asked in that chat."""
    return ctx.mode == "DAEMON" and ctx.origin == CHAT_ORIGIN


class ApprovalChannel(Protocol):
    """Asks the person behind ``ctx.origin``. Returns "y" (once), "n" or "a" (always for this session), or a
    denial nobody made (``CHANNEL_DENIALS``: nobody to ask, the asker went away, timed out, cancelled)."""

    def request(self, ctx: ToolContext, tool_name: str, detail: str, safety: SafetyPolicy) -> str: ...


@dataclass(frozen=True)
class Verdict:
    granted: bool
    how: str  # not_required | always | hook_allow | hook_deny | y | a | n | timeout | ...
    message: str = ""


class ApprovalGate:
    """Decides whether a call may proceed. Thread-safe; the only place a prompt is issued."""

    def __init__(
        self,
        channel: ApprovalChannel | None,
        hooks: HookRunner | None = None,
        *,
        timeout_s: float = APPROVAL_TIMEOUT_S,
        config: GeodeConfig | None = None,
    ) -> None:
        self._channel = channel
        self._hooks = hooks
        self._timeout_s = timeout_s
        self._config = config or GeodeConfig()  # the typed snapshot: [daemon]/[gateway] computer use
        self._prompt_locks = KeyedLocks()
        self._always: OrderedDict[str, set[str]] = OrderedDict()
        self._mu = threading.Lock()
        self._pending: dict[threading.Event, tuple[str, str]] = {}
        self._cancelled: set[threading.Event] = set()
        self._closed = False

    def use_hooks(self, hooks: HookRunner | None) -> None:
        """`geode reload`: later PermissionRequest hooks run from ``hooks``."""
        self._hooks = hooks

    def shutdown(self) -> None:
        """Deny every pending and future prompt."""
        with self._mu:
            self._closed = True
            for ev in self._pending:
                ev.set()

    def cancel(self, session_id: str, turn_id: str | None = None) -> int:
        """Deny the pending prompts of a session (or of one of its turns); returns how many."""
        n = 0
        with self._mu:
            for ev, (sess, turn) in self._pending.items():
                if sess == session_id and (turn_id is None or turn == turn_id):
                    self._cancelled.add(ev)
                    ev.set()
                    n += 1
        return n

    def always_approved(self, session_id: str) -> frozenset[str]:
        with self._mu:
            return frozenset(self._always.get(session_id, ()))

    def decide(
        self,
        ctx: ToolContext,
        spec: ToolSpec,
        detail: str | Callable[[], str],
        *,
        forced: bool = False,
        scope: str = "",
    ) -> Verdict:
        """``scope``: what an "always" answer is remembered under (``always_scope.always_key``: a shell
        call's exact command); the tool's name when empty. ``detail`` may be given as a function: it is
        worded only when a hook or a person sees it (not for a call that needs no approval)."""
        # No call skips its prompt for what its arguments look like (a "read-only" shell command list ran
        # code); only a person, a hook, the turn's skip flag or the policy decide.
        pol = spec.policy
        if pol.approval is ApprovalMode.NONE and not forced:
            return Verdict(True, "not_required")
        if spec.name in COMPUTER_TOOLS and ctx.mode == "DAEMON" and computer_allowed_in_daemon(self._config):
            return Verdict(True, "operator_opt_in")
        if not forced and self._remembered(ctx, spec, scope):
            return Verdict(True, "always")
        detail = detail() if callable(detail) else detail
        hook = self._permission_hook(ctx, spec, detail)
        if hook is not None:
            return hook
        if ctx.mode == SessionMode.AUTOMATION.value:  # nobody to ask: the operator's list, or no
            if not forced and operator_granted(ctx.mode, ctx.granted_tools, spec.name):
                return Verdict(True, "operator_allowed")
            return Verdict(False, "no_person", no_one_in_automation(spec.name))
        if is_headless(ctx.mode) and not asks_in_channel(ctx):
            return Verdict(False, "no_person", f"Nobody can approve '{spec.name}' in {ctx.mode} mode.")
        if ctx.skip_permissions and ctx.mode in ("IPC", "REPL"):  # the turn's own flag, never a connection's
            return Verdict(True, "skip_permissions")
        if self._channel is None:
            return Verdict(False, "no_channel", f"No approval channel for '{spec.name}'.")
        if len(detail) > APPROVAL_DETAIL_MAX:  # never asked with a cut request shown as if whole
            return Verdict(False, "too_large", too_large(spec.name, len(detail)))
        locks = self._prompt_locks.acquire((f"approval:{ctx.session_id}",), self._timeout_s * 2)
        if locks is None:
            return Verdict(False, "timeout", "Timed out waiting for an earlier approval prompt.")
        try:
            if not forced and self._remembered(ctx, spec, scope):  # an earlier prompt answered "always"
                return Verdict(True, "always")
            answer = self._ask(ctx, spec, detail)
        finally:
            locks.release()
        return self._apply(ctx, spec, answer, scope)

    # --- internals -----------------------------------------------------------------------------------
    def _remembered(self, ctx: ToolContext, spec: ToolSpec, scope: str = "") -> bool:
        if spec.policy.approval is not ApprovalMode.CACHED or spec.policy.data_class is DataClass.PERSONAL:
            return False
        with self._mu:
            return (scope or spec.name) in self._always.get(ctx.session_id, ())

    def _permission_hook(self, ctx: ToolContext, spec: ToolSpec, detail: str) -> Verdict | None:
        if self._hooks is None:
            return None
        payload = {"tool_name": spec.name, "detail": detail, "safety": spec.policy.model_dump(mode="json")}
        corr = {
            "session_id": ctx.session_id,
            "turn_id": ctx.turn_id,
            "step_id": ctx.step_id,
            "cwd": ctx.workspace,
        }
        out = self._hooks.run(HookEvent.PERMISSION_REQUEST, payload, corr)
        if out.decision == "block":
            return Verdict(
                False, "hook_deny", out.reason or f"Permission denied for '{spec.name}' by a hook."
            )
        if out.decision == "allow":
            return Verdict(True, "hook_allow", out.reason)
        return None

    def _notify(self, ctx: ToolContext, spec: ToolSpec) -> None:
        """Claude Code's Notification (``permission_prompt``): a person is being asked (observation)."""
        if self._hooks is None:
            return
        payload = {
            "message": f"GEODE needs your permission to use {spec.name}",
            "notification_type": "permission_prompt",
        }
        corr = {"session_id": ctx.session_id, "turn_id": ctx.turn_id, "cwd": ctx.workspace}
        try:
            self._hooks.run(HookEvent.NOTIFICATION, payload, corr)
        except Exception as exc:  # observation only
            log.debug("Notification hooks not run: %s", exc)

    def _ask(self, ctx: ToolContext, spec: ToolSpec, detail: str) -> str:
        """Ask through the channel; timeout, disconnect (any exception) or shutdown all deny."""
        done = threading.Event()
        box: dict[str, Any] = {}
        with self._mu:
            if self._closed:
                return "shutdown"
            self._pending[done] = (ctx.session_id, ctx.turn_id)

        def target() -> None:
            try:
                box["answer"] = self._channel.request(ctx, spec.name, detail, spec.policy)  # type: ignore[union-attr]
            except BaseException as exc:
                box["error"] = exc
            finally:
                done.set()

        self._notify(ctx, spec)
        threading.Thread(target=target, name=f"approval-{ctx.session_id}", daemon=True).start()
        try:
            if not done.wait(self._timeout_s):
                return "timeout"
        finally:
            with self._mu:
                self._pending.pop(done, None)
                closed = self._closed
                cancelled = done in self._cancelled
                self._cancelled.discard(done)
        if cancelled and "answer" not in box:
            return "cancelled"
        if "error" in box:
            return "disconnected"
        if closed and "answer" not in box:
            return "shutdown"
        raw = str(box.get("answer", "")).strip()
        answer, _, note = raw.partition(":")  # a denial may carry the person's reason: "n: because …"
        answer = answer.strip().lower()
        if answer == "n" and note.strip():
            return "n:" + " ".join(note.split())[:500]
        return answer if answer in ("y", "n", "a", *CHANNEL_DENIALS) else "invalid"

    def _apply(self, ctx: ToolContext, spec: ToolSpec, answer: str, scope: str = "") -> Verdict:
        answer, _, note = answer.partition(":")  # "n:<the person's reason>"
        if answer == "y":
            return Verdict(True, "y")
        if answer == "a":
            rememberable = (
                spec.policy.approval is ApprovalMode.CACHED
                and spec.policy.data_class is not DataClass.PERSONAL
            )
            if rememberable:
                with self._mu:
                    self._always.setdefault(ctx.session_id, set()).add(scope or spec.name)
                    self._always.move_to_end(ctx.session_id)
                    while len(self._always) > MAX_SESSIONS:
                        self._always.popitem(last=False)
                return Verdict(True, "a")
            return Verdict(True, "y", "'always' is not remembered for this tool; approved once.")
        messages = {
            "n": f"User denied '{spec.name}'"
            + (f" with this reason: {note}" if note else "")
            + ". Do NOT retry this tool without an explicit user request.",
            # the asker's own timeout (a chat's [messengers] approval_timeout_s) may be shorter than ours
            "timeout": f"Approval for '{spec.name}' timed out: nobody answered in time; denied.",
            "disconnected": f"The approver disconnected; '{spec.name}' denied.",
            "shutdown": f"Shutting down; '{spec.name}' denied.",
            "cancelled": f"The turn was cancelled; '{spec.name}' denied.",
            "no_origin": f"Nobody was there to approve '{spec.name}' (no origin to ask); denied.",
            "no_terminal": no_one_to_ask(spec.name),
        }
        return Verdict(False, answer, messages.get(answer, f"Invalid approval answer; '{spec.name}' denied."))
