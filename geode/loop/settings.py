"""Loop settings: budgets, wrap-up headroom, guard thresholds, retry caps, context window, Verify."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model


class VerifySettings(BaseModel):
    """``[verify]``: the judge is opt-in (its own model; a judge outage never withholds an answer)."""

    model_config = ConfigDict(frozen=True)
    judge: bool = False
    judge_model: str = ""
    repair_budget: int = Field(default=2, ge=0)
    judge_timeout_s: float = 120.0


class LoopSettings(BaseModel):
    """Everything that bounds one turn. Zero means "unlimited" for rounds, time and cost."""

    model_config = ConfigDict(frozen=True)
    model: str = ""
    max_rounds: int = Field(default=0, ge=0)
    time_budget_s: float = Field(default=0.0, ge=0)
    cost_budget_usd: float = Field(default=0.0, ge=0)
    max_tokens: int = 32768
    wrap_up_rounds: int = 2  # tool_choice none when this many rounds (or fewer) remain
    wrap_up_s: float = 30.0  # ... or when this much time (or less) remains
    error_guard: int = 3  # identical all-error batches in a row → convergence_detected
    success_guard: int = 5  # identical successful batches in a row → repeated_success_no_progress
    llm_max_retries: int = 3  # loop-level retries of a retryable provider failure
    retry_base_s: float = 1.0
    retry_max_wait_s: float = 60.0  # a Retry-After beyond this ends the turn model_action_required
    context_window_tokens: int = 200_000
    output_reserve_tokens: int = 20_000
    keep_recent_messages: int = 10
    context_recovery_attempts: int = 2
    compaction_summary: bool = True  # the model summarizes what the view drops (False: the floor only)
    compact_at: float = Field(default=0.8, gt=0, le=1)  # summarize when the view passes this share of budget
    compaction_timeout_s: float = Field(default=60.0, gt=0)  # the summary call's bound
    compaction_summary_tokens: int = Field(default=2000, ge=100)  # the summary's max output tokens
    max_tool_result_chars: int = 50_000
    tool_parallelism: int = 4
    max_tool_calls_per_reply: int = Field(default=64, ge=1)  # the rest get an error tool_result, unrun
    denied_tools: tuple[str, ...] = ()
    allowed_tools: tuple[str, ...] | None = None
    mode: str = "IPC"
    workspace: str = ""
    origin: str = ""
    skip_permissions: bool = False  # from the turn record: its submitter's --dangerously-skip-permissions
    creator: str = ""  # an MCP session's creator: recorded in the meta of the session this turn starts
    scope: str = ""  # whose session (geode.memory.scopes), recorded once in its meta: memory and search
    granted_tools: tuple[str, ...] = ()  # AUTOMATION: an operator job's explicit tools (no approval asked)
    plan_hash: str = ""  # the plan the session was composed with (compared with the executor's catalogue)
    plan_generation: int = 0
    session_source: str = ""  # "resume": the first turn after a client resumed the session (SessionStart)
    subagent_depth: int = 0  # a delegate_task child's turn: 1 (SubagentStart/Stop, not SessionStart, fire)
    compact_now: bool = False  # the chat's /compact: this turn only compacts the session (loop.compact_now)
    verify: VerifySettings = VerifySettings()

    @classmethod
    def from_mapping(cls, data: dict[str, Any] | None, **base: Any) -> LoopSettings:
        """Build from a ``turn.run`` settings dict (unknown keys ignored)."""
        names = LOOP_FIELDS if cls is LoopSettings else frozenset(cls.model_fields)
        merged: dict[str, Any] = {**base, **{k: v for k, v in (data or {}).items() if k in names}}
        if isinstance(merged.get("verify"), dict):
            merged["verify"] = VerifySettings(**merged["verify"])
        for key in ("denied_tools", "allowed_tools", "granted_tools"):
            if merged.get(key) is not None:
                merged[key] = tuple(merged[key])
        return cls(**merged)


# LoopSettings' field names, once (``model_fields`` is a property that builds its answer on every access)
LOOP_FIELDS = frozenset(LoopSettings.model_fields)

# [loop] keys that reach LoopSettings; the per-session ones (model, workspace, denied/allowed tools, mode,
# origin, verify, skip_permissions, creator, the session's plan hash/generation) are always overridden by the
# turn's own settings, so they are not configuration (skip_permissions is only the submitting connection's
# flag; creator only an MCP connection's handshake: no config value may make sessions continuable over MCP).
PER_TURN_LOOP_KEYS = frozenset(
    {
        *("model", "workspace", "denied_tools", "allowed_tools", "mode", "origin", "verify"),
        *("skip_permissions", "creator", "plan_hash", "plan_generation", "granted_tools", "scope"),
        *("session_source", "subagent_depth"),
        "compact_now",
    }
)
LoopSection = create_model(  # type: ignore[call-overload]
    "LoopSection",
    **{k: (f.annotation, f) for k, f in LoopSettings.model_fields.items() if k not in PER_TURN_LOOP_KEYS},
)
