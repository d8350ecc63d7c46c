"""Running one command hook with the Claude Code JSON contract; its answer is parsed by geode.hooks.output."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from typing import Any

from geode.hooks.events import HookOutcome
from geode.hooks.output import HookFailed, HookInvalidOutput, parse_output

__all__ = ["MAX_OUTPUT", "HookFailed", "HookInvalidOutput", "parse_output", "run_command"]
MAX_OUTPUT = 256 * 1024


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
        for pipe in (proc.stdin, proc.stdout, proc.stderr):  # communicate() left them open on a timeout
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
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
