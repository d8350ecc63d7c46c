"""Running one command hook with the Claude Code JSON contract, and parsing its answer into a HookOutcome."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from typing import Any

from geode.hooks.events import HookOutcome

MAX_OUTPUT = 256 * 1024


class HookFailed(Exception):
    """The hook crashed, timed out or printed something that is not a JSON object."""


def run_command(
    command: str,
    stdin_obj: dict[str, Any],
    *,
    timeout_s: float,
    cwd: str | None,
    text_is_context: bool = False,
) -> HookOutcome:
    """Execute ``command`` in its own process group; the whole group is killed at the timeout.

    ``text_is_context``: plain (non-JSON) stdout is additional context (Claude Code's UserPromptSubmit rule).
    """
    env = dict(os.environ)
    if cwd:
        env.setdefault("CLAUDE_PROJECT_DIR", cwd)
        env["GEODE_PROJECT_DIR"] = cwd
    try:
        proc = subprocess.Popen(
            command,
            shell=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd if cwd and os.path.isdir(cwd) else None,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        raise HookFailed(f"could not start: {exc}") from None
    try:
        out, err = proc.communicate(json.dumps(stdin_obj).encode(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise HookFailed(f"timed out after {timeout_s:g}s") from None
    finally:
        if proc.poll() is None:
            _kill_group(proc)
    stdout = out[:MAX_OUTPUT].decode("utf-8", "replace").strip()
    stderr = err[:MAX_OUTPUT].decode("utf-8", "replace").strip()
    if proc.returncode == 2:
        why = stderr or "blocked by hook (exit 2)"
        return HookOutcome(decision="block", reason=why, instruction=why)
    if proc.returncode != 0:
        raise HookFailed(f"exited with status {proc.returncode}: {stderr[:500]}")
    if not stdout:
        return HookOutcome()
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError:
        if text_is_context and not stdout.startswith(("{", "[")):
            return HookOutcome(additional_context=stdout[:10_000])
        raise HookFailed(f"printed invalid JSON: {stdout[:200]!r}") from None
    if not isinstance(data, dict):
        raise HookFailed("printed JSON that is not an object")
    return parse_output(data)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def parse_output(data: dict[str, Any]) -> HookOutcome:
    """Claude Code hook output → outcome (hookSpecificOutput wins over the legacy top-level fields)."""
    hso = data.get("hookSpecificOutput")
    hso = hso if isinstance(hso, dict) else {}
    decision = "continue"
    reason = str(data.get("reason") or "")
    legacy = data.get("decision")
    if legacy == "block":
        decision = "block"
    elif legacy == "approve":
        decision = "allow"
    pd = hso.get("permissionDecision")
    behavior = hso.get("decision", {}).get("behavior") if isinstance(hso.get("decision"), dict) else None
    pd = pd or behavior
    if pd in ("allow", "deny", "ask"):
        decision = "block" if pd == "deny" else pd
        reason = str(
            hso.get("permissionDecisionReason") or hso.get("decision", {}).get("message", "") or reason
        )
    updates: dict[str, Any] = {}
    if isinstance(hso.get("updatedInput"), dict):
        updates["tool_input"] = hso["updatedInput"]
    if isinstance(hso.get("updatedToolName"), str):
        updates["tool_name"] = hso["updatedToolName"]
    ctx = hso.get("additionalContext")
    halt = data.get("continue") is False
    if halt:
        reason = str(data.get("stopReason") or reason or "stopped by hook")
    return HookOutcome(
        decision=decision,  # type: ignore[arg-type]
        reason=reason,
        updates=updates,
        additional_context=str(ctx) if ctx else None,
        instruction=reason if decision == "block" and reason else None,
        halt=halt,
    )
