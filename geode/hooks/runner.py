"""HookRunner: runs one event's hooks in order; deciding hooks fail closed, observers never decide."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from geode.hooks import dialect
from geode.hooks.command import HookFailed, HookInvalidOutput, parse_output, run_command
from geode.hooks.config import HookCallable, HookEntry, entry
from geode.hooks.events import (
    CONTEXT_EVENTS,
    DECIDING_EVENTS,
    MATCHED_FIELD,
    HookEvent,
    HookOutcome,
    stronger,
)
from geode.hooks.settings import DEFAULT_TIMEOUT_S
from geode.redaction import redact_text
from geode.sessions.transcript import hook_transcript_path

log = logging.getLogger(__name__)
MAX_OBSERVER_BACKLOG = 1000  # slow observers shed load instead of growing a queue without bound


class HookRunner:
    """Thread-safe; shared by the executor (tool events) and the loop (UserPromptSubmit, PostVerify, Stop)."""

    def __init__(
        self, entries: Iterable[HookEntry] = (), *, cwd: str | None = None, observers: int = 2
    ) -> None:
        self._entries: list[HookEntry] = []
        self._lock = threading.Lock()
        self._cwd = cwd
        self._pool = ThreadPoolExecutor(max_workers=observers, thread_name_prefix="hook-observer")
        self._queued = 0  # observation invocations waiting or running (bounded by MAX_OBSERVER_BACKLOG)
        self.dropped_observations = 0
        for e in entries:
            self.add(e)

    @property
    def idle(self) -> bool:
        """No hook at all (the default): every ``run`` answers an empty ``HookOutcome`` (callers skip
        building its payload)."""
        return not self._entries

    # --- registration --------------------------------------------------------------------------------
    def add(self, hook: HookEntry) -> None:
        with self._lock:
            if any(h.name == hook.name and h.event == hook.event for h in self._entries):
                raise ValueError(f"hook {hook.name!r} already registered for {hook.event.value}")
            self._entries.append(hook)

    def register(
        self,
        event: str | HookEvent,
        fn: HookCallable,
        *,
        name: str | None = None,
        matcher: str = "",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        fail: str = "closed",
    ) -> None:
        """A Python hook: ``fn(event, payload, correlation)`` → HookOutcome | Claude Code dict | None."""
        self.add(
            entry(
                event,
                name=name or getattr(fn, "__name__", "hook"),
                matcher=matcher,
                fn=fn,
                timeout_s=timeout_s,
                fail=fail,
            )
        )

    def has(self, event: str | HookEvent, tool_name: str | None = None) -> bool:
        ev = HookEvent(event)
        return any(h.event == ev and h.matches(self._match_name(h, tool_name)) for h in self._snapshot())

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # --- running -------------------------------------------------------------------------------------
    def run(
        self, event: str | HookEvent, payload: dict[str, Any], correlation: dict[str, Any]
    ) -> HookOutcome:
        """Run every matching hook in order. Rewrites compose; the first block ends the chain."""
        ev = HookEvent(event)
        if not self._entries:  # no hook at all (the default): nothing to match, no snapshot taken
            return HookOutcome()
        tool = payload.get("tool_name")
        if ev in MATCHED_FIELD:  # Claude Code: SessionStart's matcher is the source, PreCompact's the trigger
            value = payload.get(MATCHED_FIELD[ev])
            hooks = [h for h in self._snapshot() if h.event == ev and h.matches(str(value or ""))]
        else:
            hooks = [h for h in self._snapshot() if h.event == ev and h.matches(self._match_name(h, tool))]
        if not hooks:
            return HookOutcome()
        if ev not in DECIDING_EVENTS and ev not in CONTEXT_EVENTS:
            for h in hooks:
                with self._lock:
                    if self._queued >= MAX_OBSERVER_BACKLOG:
                        self.dropped_observations += 1
                        continue
                    self._queued += 1
                try:
                    self._pool.submit(self._observe, h, ev, dict(payload), dict(correlation))
                except RuntimeError:  # closed: observation is best effort
                    with self._lock:
                        self._queued -= 1
            return HookOutcome()
        current = dict(payload)
        decision, reasons, contexts, failures = "continue", [], [], []
        updates: dict[str, Any] = {}
        decided_by = ""
        for h in hooks:
            try:
                out = self._invoke(h, ev, current, correlation)
                new = self._apply(h, current, out.updates) if out.updates else {}
            except Exception as exc:  # HookFailed, or anything unexpected: one line, never a traceback
                why = _failure_line(h, exc)
                failures.append(f"{h.name}: {why}")
                log.warning("%s (%s)", why, ev.value)
                if h.fail == "closed" and ev in DECIDING_EVENTS:
                    return HookOutcome(
                        decision="block",
                        reason=f"{why}; failing closed",
                        decided_by=h.name,
                        failures=tuple(failures),
                        instruction=None,
                        updates=updates,
                    )
                continue
            if new:  # a rewrite that cannot be applied failed above, like any other bad answer
                updates.update(new)
                current.update(new)
            if out.additional_context:
                contexts.append(out.additional_context)
            if out.reason:
                reasons.append(out.reason)
            if stronger(out.decision, decision) != decision or out.decision == decision != "continue":
                decided_by = h.name
            decision = stronger(out.decision, decision)
            if out.blocked or out.halt:
                return HookOutcome(
                    decision=decision,
                    reason=out.reason,
                    updates=updates,  # type: ignore[arg-type]
                    additional_context="\n".join(contexts) or None,
                    instruction=out.instruction,
                    halt=out.halt,
                    decided_by=h.name,
                    failures=tuple(failures),
                )
        return HookOutcome(
            decision=decision,
            reason="; ".join(reasons),
            updates=updates,  # type: ignore[arg-type]
            additional_context="\n".join(contexts) or None,
            decided_by=decided_by,
            failures=tuple(failures),
        )

    # --- internals -----------------------------------------------------------------------------------
    def _snapshot(self) -> list[HookEntry]:
        with self._lock:
            return list(self._entries)

    @staticmethod
    def _match_name(h: HookEntry, tool: str | None) -> str | None:
        if tool is None:
            return None
        return dialect.tool_name_out(tool) if h.dialect == "claude-code" else tool

    def _stdin(
        self, h: HookEntry, ev: HookEvent, payload: dict[str, Any], corr: dict[str, Any]
    ) -> dict[str, Any]:
        data: dict[str, Any] = {
            "session_id": corr.get("session_id", ""),
            "transcript_path": corr.get("transcript_path") or hook_transcript_path(corr.get("session_id")),
            "cwd": corr.get("cwd") or self._cwd or "",
            "hook_event_name": ev.value,
            **{k: v for k, v in corr.items() if k not in ("cwd", "session_id")},
            **payload,
        }
        if h.dialect == "claude-code" and "tool_name" in payload:
            name = str(payload["tool_name"])
            data["tool_name"] = dialect.tool_name_out(name)
            if isinstance(payload.get("tool_input"), dict):
                data["tool_input"] = dialect.tool_input_out(name, payload["tool_input"])
        return data

    def _apply(self, h: HookEntry, current: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
        """Normalise updates: tool_input merges over the current input; dialect names map back."""
        new = dict(raw)
        name = str(current.get("tool_name", ""))
        if "tool_name" in new:
            new["tool_name"] = (
                dialect.tool_name_in(str(new["tool_name"]))
                if h.dialect == "claude-code"
                else str(new["tool_name"])
            )
            name = new["tool_name"]
        if isinstance(new.get("tool_input"), dict):
            given = new["tool_input"]
            if h.dialect == "claude-code":
                given = dialect.tool_input_in(name, given)
            base = current.get("tool_input") if isinstance(current.get("tool_input"), dict) else {}
            new["tool_input"] = {**base, **given}
        return new

    def _invoke(
        self, h: HookEntry, ev: HookEvent, payload: dict[str, Any], corr: dict[str, Any]
    ) -> HookOutcome:
        if h.command is not None:
            cwd = corr.get("cwd") or self._cwd
            return run_command(
                h.command,
                self._stdin(h, ev, payload, corr),
                timeout_s=h.timeout_s,
                cwd=cwd,
                text_is_context=ev in (HookEvent.USER_PROMPT_SUBMIT, HookEvent.SESSION_START),
            )
        return _call_with_timeout(h, ev, payload, corr)

    def _observe(self, h: HookEntry, ev: HookEvent, payload: dict[str, Any], corr: dict[str, Any]) -> None:
        try:
            self._invoke(h, ev, payload, corr)
        except Exception as exc:  # observation never affects control flow
            log.info("observation hook %s (%s) failed: %s", h.name, ev.value, redact_text(str(exc), 500))
        finally:
            with self._lock:
                self._queued -= 1


def _failure_line(h: HookEntry, exc: Exception) -> str:
    """One redacted line saying which hook failed and how (the model may read it; no traceback)."""
    who = f"hook {h.name!r}"
    if h.command is not None and h.command != h.name:
        cmd = h.command if len(h.command) <= 80 else h.command[:77] + "..."
        who += f" ({cmd})"
    if isinstance(exc, HookInvalidOutput):
        verb = "printed" if h.command is not None else "returned"
        what = f"{verb} an invalid decision: {exc}"
    elif isinstance(exc, HookFailed):
        what = f"failed ({exc})"
    else:
        what = f"failed ({type(exc).__name__}: {exc})"
    return " ".join(redact_text(f"{who} {what}", 500).split())


def _call_with_timeout(
    h: HookEntry, ev: HookEvent, payload: dict[str, Any], corr: dict[str, Any]
) -> HookOutcome:
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = h.fn(ev.value, dict(payload), dict(corr))  # type: ignore[misc]
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name=f"hook-{h.name}", daemon=True).start()
    if not done.wait(h.timeout_s):
        raise HookFailed(f"timed out after {h.timeout_s:g}s")
    if "error" in box:
        raise HookFailed(f"raised {type(box['error']).__name__}: {box['error']}")
    value = box.get("value")
    if value is None:
        return HookOutcome()
    if isinstance(value, HookOutcome):
        return value
    if isinstance(value, dict):
        return parse_output(value)
    raise HookFailed(f"returned {type(value).__name__}, expected HookOutcome, dict or None")
