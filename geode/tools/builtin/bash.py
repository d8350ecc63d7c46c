"""run_bash: a shell command in its own process group with CPU/file-size limits, capped output, a deadline."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import IO, Any

from geode.tools.builtin.bash_groups import TOKEN_ENV, GroupNotes
from geode.tools.handlers import ToolEnv, ToolFailure

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30
MAX_TIMEOUT_S = 600
STDOUT_CAP = 10_000
STDERR_CAP = 5_000
GRACE_S = 2.0

BLOCKED_PATTERNS = tuple(
    re.compile(p)
    for p in (
        r"\brm\s+(-[a-zA-Z]*\s+)*-[a-zA-Z]*(r[a-zA-Z]*f|f[a-zA-Z]*r)[a-zA-Z]*\s+(--\s+)?/(\*|\s|$)",
        r"(^|[;&|(\s])sudo\s",
        r">\s*/etc/",
        r"\b(curl|wget)\b[^|]*\|\s*(sudo\s+)?(ba|z|da)?sh\b",
        r"\bmkfs\.",
        r"\bdd\s+[^|;]*if=[^|;]*of=/dev/",
        r"\bchmod\s+-R\s+777\s+/(\s|$)",
        r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:",
    )
)


@dataclass(frozen=True)
class BashLimits:
    """Per-executor limits (``services["bash_limits"]`` overrides the defaults)."""

    cpu_s: int | None = None  # None: the call's timeout
    fsize_bytes: int = 50 * 1024 * 1024
    grace_s: float = GRACE_S


def clamp_timeout(args: dict[str, Any]) -> int:
    raw = args.get("timeout") or DEFAULT_TIMEOUT_S
    return int(min(MAX_TIMEOUT_S, max(1, int(raw))))


def deadline(args: dict[str, Any]) -> float:
    """The executor's wall-clock deadline for this call: the command's own timeout plus the kill grace."""
    return clamp_timeout(args) + GRACE_S + 3.0


def blocked(command: str) -> str | None:
    for rx in BLOCKED_PATTERNS:
        if rx.search(command):
            return rx.pattern
    return None


class _Capped:
    """Drain a pipe, keeping the first ``cap`` characters and counting the rest."""

    def __init__(self, stream: IO[bytes], cap: int) -> None:
        self.cap, self.kept, self.total = cap, bytearray(), 0
        self._t = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self._t.start()

    def _drain(self, stream: IO[bytes]) -> None:
        for chunk in iter(lambda: stream.read(8192), b""):
            self.total += len(chunk)
            room = self.cap * 4 - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]

    def text(self, join_s: float) -> tuple[str, bool]:
        self._t.join(join_s)
        s = self.kept.decode("utf-8", "replace")
        return s[: self.cap], len(s) > self.cap or self.total > len(self.kept)


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_bash(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    command = args["command"]
    pattern = blocked(command)
    if pattern is not None:
        raise ToolFailure("Command matches an always-blocked destructive pattern; not run.", "bash_blocked")
    limits: BashLimits = env.service("bash_limits") or BashLimits()
    # never outlive the executor's deadline: finish (and kill the group) in time to report a known outcome
    timeout = max(1, min(clamp_timeout(args), int(env.deadline_s - limits.grace_s - 1)))
    cpu = limits.cpu_s or timeout
    fsize_kb = max(1, limits.fsize_bytes // 1024)
    wrapper = f'ulimit -t {cpu} -f {fsize_kb} && exec /bin/bash -c "$1"'
    notes: GroupNotes | None = env.service("bash_groups")  # survives us: a new executor enforces the deadline
    token = GroupNotes.new_token()
    proc = subprocess.Popen(
        ["/bin/bash", "-c", wrapper, "geode-bash", command],
        cwd=str(env.workspace) if env.workspace.is_dir() else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, TOKEN_ENV: token} if notes is not None else None,
    )
    pgid = proc.pid
    out, err = _Capped(proc.stdout, STDOUT_CAP), _Capped(proc.stderr, STDERR_CAP)  # type: ignore[arg-type]
    timed_out = cancelled = False
    noted = None
    try:
        noted = _note(notes, pgid, token, env, timeout, limits.grace_s)
        cancelled = _wait(proc, timeout, env)
        if cancelled:
            raise subprocess.TimeoutExpired(command, timeout)
    except subprocess.TimeoutExpired:
        timed_out = not cancelled
        _kill_group(pgid, signal.SIGTERM)
        try:
            proc.wait(timeout=limits.grace_s)
        except subprocess.TimeoutExpired:
            pass
    finally:
        _kill_group(pgid, signal.SIGKILL)  # nothing of this call outlives it (background children included)
        if proc.poll() is None:
            proc.wait()
        if noted is not None:
            GroupNotes.forget(noted)
    stdout, out_cut = out.text(2.0)
    stderr, err_cut = err.text(2.0)
    body = {
        "exit_code": proc.returncode,
        "stdout": stdout,
        "stderr": stderr,
        "stdout_truncated": out_cut,
        "stderr_truncated": err_cut,
        "pgid": pgid,
    }
    if proc.returncode is not None and proc.returncode < 0:
        body["signal"] = signal.Signals(-proc.returncode).name
    if cancelled:
        raise ToolFailure("Command cancelled; its process group was killed.", "bash_cancelled", **body)
    if timed_out:
        raise ToolFailure(
            f"Command timed out after {timeout}s; its process group was killed.", "bash_timeout", **body
        )
    return body


def _note(
    notes: GroupNotes | None, pgid: int, token: str, env: ToolEnv, timeout: float, grace_s: float
) -> Any:
    if notes is None:
        return None
    try:
        return notes.note(
            pgid,
            token,
            operation_id=env.ctx.operation_id,
            session_id=env.ctx.session_id,
            timeout_s=timeout,
            grace_s=grace_s,
        )
    except OSError as exc:  # the call still runs and is still killed at its deadline by this process
        log.warning("run_bash: could not note process group %d: %s", pgid, exc)
        return None


def _wait(proc: subprocess.Popen[bytes], timeout: float, env: ToolEnv) -> bool:
    """Wait for the command; True when the call was cancelled (the executor's deadline passed) first."""
    end = time.monotonic() + timeout
    while True:
        left = end - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        try:
            proc.wait(timeout=min(0.05, left))
            return False
        except subprocess.TimeoutExpired:
            if env.cancel.is_set():
                return True
