"""run_bash: a shell command, approved by a person, with a secret-free environment, contained and capped.

The boundary is the approval (run_bash always asks in IPC/REPL; modes without a person deny it), the
environment (``bash_env.shell_env``: no provider/messenger keys, nothing from ``$GEODE_HOME/.env``, no
``GEODE_*``) and containment (a PID namespace per call where one can be made, see ``bash_subreaper``; a
cgroup v2 per call for accounting; a token/ancestry walk; nothing of the call outlives it). Plus rlimits
(CPU, file size), capped output, a deadline.
"""

from __future__ import annotations

import logging
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from geode.tools.builtin.bash_containment import TOKEN_ENV, CallBox
from geode.tools.builtin.bash_env import shell_env
from geode.tools.builtin.bash_groups import GroupNotes
from geode.tools.handlers import ToolEnv, ToolFailure
from geode.tools.settings import BASH_CPU_S, BASH_FSIZE_BYTES, BASH_PID_NAMESPACE

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30
MAX_TIMEOUT_S = 600
STDOUT_CAP = 10_000
STDERR_CAP = 5_000
GRACE_S = 2.0

# A courtesy, not a boundary: a pattern list over shell text cannot hold (``r''m -rf /``, ``$'\x72m'``,
# variables, eval ... all pass). It only saves a person from approving an obvious accident; what holds is the
# approval, the stripped environment and the containment.
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
SUBREAPER = str(Path(__file__).with_name("bash_subreaper.py"))
# the shell waits on the gate fd until it is in its cgroup, then sets its rlimits and runs the command
_WRAPPER = (
    'read -r go <&{fd} && [ "$go" = go ] || exit 125; exec {fd}<&-; '
    'ulimit -t {cpu} -f {fsize_kb} && exec /bin/bash -c "$1"'
)


@dataclass(frozen=True)
class BashLimits:
    """Per-executor limits (``services["bash_limits"]`` overrides the defaults)."""

    cpu_s: int | None = BASH_CPU_S  # None: the call's timeout
    fsize_bytes: int = BASH_FSIZE_BYTES
    grace_s: float = GRACE_S
    cgroup: bool = True  # False: contain by the token/ancestry walk alone (the fallback, also used in tests)
    pid_namespace: bool = BASH_PID_NAMESPACE  # False: no PID namespace ([tools.bash]; the fallback)


NO_PIDNS_NOTE = (
    "run without a PID namespace ({why}): a process of this command that leaves its cgroup, drops its "
    "environment and kills its subreaper can outlive the call"
)


def clamp_timeout(args: dict[str, Any]) -> int:
    raw = args.get("timeout") or DEFAULT_TIMEOUT_S
    return int(min(MAX_TIMEOUT_S, max(1, int(raw))))


def deadline(args: dict[str, Any]) -> float:
    """The executor's wall-clock deadline for this call: the command's own timeout plus the kill grace."""
    return clamp_timeout(args) + GRACE_S + 3.0


def blocked(command: str) -> str | None:
    """The first always-blocked pattern the text matches (a courtesy check; see ``BLOCKED_PATTERNS``)."""
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
        with stream:  # closed at EOF: the pipe is ours to close, not the garbage collector's
            for chunk in iter(lambda: stream.read(8192), b""):
                self.total += len(chunk)
                room = self.cap * 4 - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]

    def text(self, join_s: float) -> tuple[str, bool]:
        self._t.join(join_s)
        s = self.kept.decode("utf-8", "replace")
        return s[: self.cap], len(s) > self.cap or self.total > len(self.kept)


def run_bash(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    command = args["command"]
    pattern = blocked(command)
    if pattern is not None:
        raise ToolFailure("Command matches an always-blocked destructive pattern; not run.", "bash_blocked")
    limits: BashLimits = env.service("bash_limits") or BashLimits()
    # never outlive the executor's deadline: finish (and kill the call) in time to report a known outcome
    timeout = max(1, min(clamp_timeout(args), int(env.deadline_s - limits.grace_s - 1)))
    notes: GroupNotes | None = env.service("bash_groups")  # survives us: a new executor enforces the deadline
    token = GroupNotes.new_token()
    box = CallBox.open(token, use_cgroup=limits.cgroup)
    ulimits = wrapper_args(limits, timeout)
    proc, pgid, gate, mode = _start(command, ulimits, env, token, box, limits.pid_namespace)
    began = time.monotonic()
    out, err = _Capped(proc.stdout, STDOUT_CAP), _Capped(proc.stderr, STDERR_CAP)  # type: ignore[arg-type]
    timed_out = cancelled = False
    noted = None
    try:
        box.adopt(proc.pid, pgid)
        noted = _note(notes, pgid, token, env, timeout, limits.grace_s, box)
        gate.release()
        cancelled = _wait(proc, timeout, env)
        if cancelled:
            raise subprocess.TimeoutExpired(command, timeout)
    except subprocess.TimeoutExpired:
        timed_out = not cancelled
        box.signal(signal.SIGTERM)
        try:
            proc.wait(timeout=limits.grace_s)
        except subprocess.TimeoutExpired:
            pass
    finally:
        gate.close()  # no-op once released; otherwise the command never starts
        box.close()  # nothing of this call outlives it (setsid, nohup and double forks included)
        if proc.poll() is None:
            proc.wait()
        if noted is not None:
            GroupNotes.forget(noted)
    seconds = round(time.monotonic() - began, 2)
    stdout, out_cut = out.text(2.0)
    stderr, err_cut = err.text(2.0)
    body = {
        "exit_code": proc.returncode,
        "stdout": stdout,
        "stderr": stderr,
        "stdout_truncated": out_cut,
        "stderr_truncated": err_cut,
        "pgid": pgid,
        "containment": "pid_namespace" if box.init is not None else "subreaper",
        "seconds": seconds,
    }
    if box.init is None:
        body["note"] = NO_PIDNS_NOTE.format(why=_why(mode))
    if proc.returncode is not None and proc.returncode < 0:
        body["signal"] = signal.Signals(-proc.returncode).name
    # stopped by GEODE after it began: the executor reports it interrupted (it may have partly run)
    if cancelled:
        raise ToolFailure(
            "Command cancelled; all its processes were killed.",
            "bash_cancelled",
            interrupted_by="cancel",
            **body,
        )
    if timed_out:
        raise ToolFailure(
            f"Command timed out after {timeout}s; all its processes were killed.",
            "bash_timeout",
            interrupted_by="deadline",
            **body,
        )
    return body


def pidns_probe(timeout_s: float = 10.0) -> str:
    """What a run_bash call gets here: ``pidns``, ``userns`` or ``none:<why>`` (for ``geode doctor``)."""
    try:
        r = subprocess.run(
            [sys.executable, "-I", "-S", SUBREAPER, "--probe"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=shell_env(),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"none:{type(exc).__name__}"
    return r.stdout.strip() or f"none:exit-{r.returncode}"


def pidns_line(enabled: bool, mode: str) -> tuple[bool, str]:
    """(holds, one line) on run_bash's containment, for ``geode doctor``."""
    if enabled and mode in ("pidns", "userns"):
        how = "" if mode == "pidns" else " (inside a user namespace of this uid)"
        return True, f"each call runs in a PID namespace of its own{how}"
    return False, "calls " + NO_PIDNS_NOTE.format(why=_why(mode if enabled else "off")).replace("this", "a")


def wrapper_args(limits: BashLimits, timeout: int) -> tuple[int, int]:
    """(CPU seconds, file-size KiB) for the shell's ulimits."""
    return limits.cpu_s or timeout, max(1, limits.fsize_bytes // 1024)


def _why(mode: str) -> str:
    if mode == "off":
        return "turned off: [tools.bash] pid_namespace = false"
    return "none could be made here: " + mode.removeprefix("none:")


def _start(
    command: str, ulimits: tuple[int, int], env: ToolEnv, token: str, box: CallBox, pidns: bool
) -> tuple[subprocess.Popen[bytes], int, _Gate, str]:
    """Start the call's subreaper with the shell waiting at its gate: (subreaper, shell pid, gate, mode).

    With ``pidns``, in a PID namespace of its own; where its init could not be set up (``none:...``), the
    call starts again without one (the mode says why)."""
    proc, shell, init, gate, mode = _spawn(command, ulimits, env, token, box, pidns)
    if pidns and shell == 0 and mode.startswith("none:"):
        log.warning("run_bash: no PID namespace for this call (%s); contained by its subreaper", mode[5:])
        with proc:
            proc.wait()
        proc, shell, init, gate, _ = _spawn(command, ulimits, env, token, box, False)
    if shell == 0:
        gate.close()
        with proc:  # kills, then closes its pipes and reaps it on the way out
            proc.kill()
        box.close()
        raise ToolFailure("The shell could not be started.", "bash_start_failed")
    box.init = init or None
    return proc, shell, gate, mode


def _spawn(
    command: str, ulimits: tuple[int, int], env: ToolEnv, token: str, box: CallBox, pidns: bool
) -> tuple[subprocess.Popen[bytes], int, int, _Gate, str]:
    gate_r, gate_fd = os.pipe()
    report_r, report_w = os.pipe()
    gate = _Gate(gate_fd)
    wrapper = _WRAPPER.format(cpu=ulimits[0], fsize_kb=ulimits[1], fd=gate_r)
    ns = "pidns" if pidns else "nopidns"
    argv = [sys.executable, "-I", "-S", SUBREAPER, str(report_w), ns, "/bin/bash", "-c", wrapper]
    try:
        proc = subprocess.Popen(
            [*argv, "geode-bash", command],
            cwd=str(env.workspace) if env.workspace.is_dir() else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env={**shell_env(), TOKEN_ENV: token},
            pass_fds=(gate_r, report_w),
        )
    except BaseException:
        gate.close()
        box.close()
        raise
    finally:
        os.close(gate_r)
        os.close(report_w)
    shell, init, mode = _read_report(report_r, 10.0)
    if shell == 0:
        gate.close()
    return proc, shell, init, gate, mode


def _read_report(fd: int, timeout_s: float) -> tuple[int, int, str]:
    """The subreaper's line ``<shell pid> <init pid or 0> <mode>``; (0, 0, ...) when none came in time."""
    raw, end = b"", time.monotonic() + timeout_s
    try:
        while not raw.endswith(b"\n") and (left := end - time.monotonic()) > 0:
            if not select.select([fd], [], [], left)[0]:
                break
            chunk = os.read(fd, 256)
            if not chunk:
                break
            raw += chunk
    finally:
        os.close(fd)
    parts = raw.decode(errors="replace").split()
    if len(parts) != 3 or not (parts[0].isdigit() and parts[1].isdigit()):
        return 0, 0, "none:no-report"
    return int(parts[0]), int(parts[1]), parts[2]


class _Gate:
    """The write end of the pipe the wrapper waits on; ``release`` writes "go" and closes it, once."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        self._end(b"go\n")

    def close(self) -> None:
        """Close without "go": a shell still waiting exits (125) without running the command."""
        self._end(b"")

    def _end(self, word: bytes) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if word:
                os.write(fd, word)
        except OSError:  # the shell is already gone
            pass
        finally:
            os.close(fd)


def _note(
    notes: GroupNotes | None,
    pgid: int,
    token: str,
    env: ToolEnv,
    timeout: float,
    grace_s: float,
    box: CallBox,
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
            cgroup=str(box.cgroup) if box.cgroup is not None else None,
            init=box.init,
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
