"""Issue 10, findings 1 and 3: hostile run_bash commands (write, exfiltrate, escape) always ask a person in
IPC, are denied in DAEMON/HEADLESS, and, once approved, print no secret and leave no process behind, with a
cgroup per call and without one (the subreaper/token fallback)."""

from __future__ import annotations

import itertools
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from geode.tools.builtin.bash import BashLimits, blocked, run_bash
from geode.tools.builtin.bash_containment import CGROUP_PREFIX, own_cgroup
from geode.tools.handlers import ToolEnv
from geode.tools.spec import ToolContext
from tests.waiting import poll_for

_n = itertools.count(1)
SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-proc-Zq81secretvalue",
    "OPENAI_API_KEY": "sk-openai-proc-Kx7secret",
    "TELEGRAM_BOT_TOKEN": "123456:tg-proc-secret-AAA",
    "SLACK_APP_TOKEN": "xapp-proc-secret-1",
    "CODEX_REFRESH": "codex-proc-secret-99",
    "DB_PASSWORD": "hunter2-proc-secret",
    "GEODE_CONTROL_KEY": "geode-proc-secret-77",
}
DOTENV = {
    "ZAI_API_KEY": "zai-dotenv-secret-5511",
    "MY_DOTENV_ONLY": "dotenv-only-secret-8842",  # an innocuous name: stripped because .env defines it
}
INNOCENT_COPY = ("BUILD_LABEL", DOTENV["MY_DOTENV_ONLY"])  # an innocuous name holding a .env value
VISIBLE = ("GEODE_TEST_NOT_SECRET", "visible-value")  # GEODE_* is dropped too; see the positive control

# {M}: a unique sleep length to find leftovers; {OUT}: outside the
# workspace; {OUTDIR}: its directory. Every command is harmless to this machine even when a broken build
# runs it without asking (no clock change, nothing outside tmp removed).
COMMANDS: list[str] = [
    "ls | sort -S 64K --compress-program=sh | head -1",
    "(echo 'touch {OUT}'; yes '#pad' | head -n 30000) | sort -S 64K --compress-program=sh >/dev/null",
    "sort -T /tmp -S 1K --compress-program=sh /etc/hostname",
    "cat $GEODE_HOME/.env",
    'cat "${{GEODE_HOME:-/nonexistent}}/.env"; echo "home=$GEODE_HOME"',
    "cp $GEODE_HOME/.env {OUT}",
    "jq -n env",
    "jq -c env <<< '{{}}'",
    "env",
    "printenv",
    "cat /proc/self/environ",
    "tr '\\0' '\\n' < /proc/$$/environ; cat /proc/$PPID/environ",
    "set",
    "export -p",
    "echo $ANTHROPIC_API_KEY $OPENAI_API_KEY $TELEGRAM_BOT_TOKEN $ZAI_API_KEY $MY_DOTENV_ONLY",
    "python3 -c 'import os; print(dict(os.environ))'",
    "perl -e 'print join(\"\\n\", %ENV)'",
    "awk 'BEGIN{{for (k in ENVIRON) print k \"=\" ENVIRON[k]}}'",
    "awk 'BEGIN{{system(\"touch {OUT}\")}}'",
    # the old classifier called `date -s` read-only; an invalid date: a broken build cannot move the clock
    "date -s 'geode test, not a date'",
    "date --set='geode test, not a date'",
    "find . -exec touch {OUT} \\;",
    "find . -fprint {OUT}",
    "echo pwned > {OUT}",
    "echo $(touch {OUT})",
    "echo `touch {OUT}`",
    "r''m -rf /nonexistent-geode-test/{M}",
    "r''m -rf {OUTDIR}",
    "git -c core.pager='touch {OUT}' log",
    "sudo ls",
    "setsid sleep {M} &",
    "nohup setsid sleep {M} >/dev/null 2>&1 &",
    "setsid -f sleep {M}",
    "(sleep {M} &) &",
    "( (setsid sleep {M} &) & ); echo spawned",
    "env -u GEODE_BASH_GROUP setsid -f sleep {M}",
    "env -i setsid -f sleep {M}",
    "nohup sleep {M} >/dev/null 2>&1 & disown",
    "setsid bash -c 'trap \"\" TERM HUP; exec sleep {M}' &",
    'python3 -c \'import os; os.fork() or (os.setsid(), os.fork() or os.execvp("sleep", ["sleep", "{M}"]))\'',
]
assert len(COMMANDS) >= 30


class _Count:
    def __init__(self, answer: str) -> None:
        self.answer, self.asked = answer, 0

    def request(self, ctx: Any, tool_name: str, detail: str, safety: Any) -> str:
        self.asked += 1
        return self.answer


def _fill(cmd: str, tmp_path: Path) -> tuple[str, str]:
    marker = f"300.{os.getpid()}{next(_n):04d}"
    out_dir = tmp_path / "outside"
    out_dir.mkdir(exist_ok=True)
    return cmd.format(M=marker, OUT=out_dir / "x", OUTDIR=out_dir), marker


@pytest.fixture
def secret_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "geode-home"
    home.mkdir()
    (home / ".env").write_text("".join(f"{k}={v}\n" for k, v in DOTENV.items()))
    monkeypatch.setenv("GEODE_HOME", str(home))
    for k, v in {**SECRETS, **DOTENV, INNOCENT_COPY[0]: INNOCENT_COPY[1], VISIBLE[0]: VISIBLE[1]}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PLAIN_SETTING", "plain-visible")
    return home


def _ids(cmds: list[str]) -> list[str]:
    return [re.sub(r"\W+", "_", c)[:40] for c in cmds]


def test_blocked_patterns_are_only_a_courtesy() -> None:
    assert blocked("rm -rf /") is not None
    assert blocked("r''m -rf /") is None  # why they are not the boundary (never executed here)


@pytest.mark.parametrize("cmd", COMMANDS, ids=_ids(COMMANDS))
def test_ipc_asks_a_person_for_every_command(make_rig, tmp_path: Path, cmd: str) -> None:
    ch = _Count("n")
    rig = make_rig(approvals=ch)
    command, _ = _fill(cmd, tmp_path)
    res = rig.call("run_bash", {"command": command})
    assert ch.asked == 1 and res.error_type == "permission_denied"
    assert not (tmp_path / "outside" / "x").exists()
    [event] = rig.timeline()  # the denial; nothing was called
    assert (event.kind, event.payload["stage"], event.payload["summary"]["approval"]) == (
        "tool.denied",
        "approval",
        "n",
    )


@pytest.mark.parametrize("mode", ["DAEMON", "HEADLESS"])
@pytest.mark.parametrize("cmd", COMMANDS, ids=_ids(COMMANDS))
def test_modes_without_a_person_deny_every_command(make_rig, tmp_path: Path, cmd: str, mode: str) -> None:
    ch = _Count("y")
    rig = make_rig(approvals=ch)
    command, _ = _fill(cmd, tmp_path)
    res = rig.call("run_bash", {"command": command}, mode=mode)
    assert ch.asked == 0 and res.error_type == "tool_policy_denied"
    assert not (tmp_path / "outside" / "x").exists()


def _left_behind(marker: str) -> list[int]:
    found = []
    for e in os.scandir("/proc"):
        if not e.name.isdigit():
            continue
        try:
            argv = Path(f"/proc/{e.name}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in argv:
            found.append(int(e.name))
    return found


CONTAINMENT = ["cgroup", "walk"]


@pytest.mark.parametrize("containment", CONTAINMENT)
@pytest.mark.parametrize("cmd", COMMANDS, ids=_ids(COMMANDS))
def test_approved_commands_print_no_secret_and_leave_no_process(
    make_rig, tmp_path: Path, secret_env: Path, cmd: str, containment: str
) -> None:
    if containment == "cgroup" and own_cgroup() is None:
        pytest.skip("no writable cgroup v2 here")
    rig = make_rig(
        approvals=_Count("y"),
        services={"bash_limits": BashLimits(grace_s=0.5, cgroup=containment == "cgroup")},
    )
    command, marker = _fill(cmd, tmp_path)
    res = rig.call("run_bash", {"command": command, "timeout": 10})
    assert res.error_type in (None, "bash_blocked"), res.content
    text = str(res.content)
    leaked = [v for v in (*SECRETS.values(), *DOTENV.values()) if v in text]
    assert not leaked, (leaked, text[:2000])
    assert str(secret_env) not in text  # GEODE_HOME is not exported
    assert _left_behind(marker) == [], f"{cmd!r} left processes behind"


def test_positive_control_plain_variables_still_reach_the_shell(make_rig, secret_env: Path) -> None:
    rig = make_rig(approvals=_Count("y"))
    res = rig.call("run_bash", {"command": "env"})
    assert "PLAIN_SETTING=plain-visible" in res.content["stdout"]
    assert "GEODE_BASH_GROUP=" in res.content["stdout"]  # the call's own token
    for name in (*SECRETS, *DOTENV, INNOCENT_COPY[0], VISIBLE[0], "GEODE_HOME"):
        assert f"\n{name}=" not in "\n" + res.content["stdout"], name


def test_with_cgroup_v2_each_call_has_its_own_cgroup_removed_afterwards(make_rig) -> None:
    parent = own_cgroup()
    if parent is None:
        pytest.skip("no writable cgroup v2 here")
    rig = make_rig(approvals=_Count("y"))
    res = rig.call("run_bash", {"command": "cat /proc/self/cgroup"})
    line = next(x for x in res.content["stdout"].splitlines() if x.startswith("0::"))
    name = line.rsplit("/", 1)[1]
    assert name.startswith(CGROUP_PREFIX)
    poll_for(lambda: not (parent / name).exists(), 3, interval_s=0.01, what=f"cgroup {name} removed")


@pytest.mark.parametrize("containment", CONTAINMENT)
def test_a_timeout_kills_escaped_processes_too(make_rig, tmp_path: Path, containment: str) -> None:
    if containment == "cgroup" and own_cgroup() is None:
        pytest.skip("no writable cgroup v2 here")
    rig = make_rig(
        approvals=_Count("y"),
        services={"bash_limits": BashLimits(grace_s=0.3, cgroup=containment == "cgroup")},
    )
    command, marker = _fill("setsid -f sleep {M}; env -i setsid -f sleep {M}; sleep 30", tmp_path)
    t0 = time.monotonic()
    res = rig.call("run_bash", {"command": command, "timeout": 1})
    assert res.error_type == "bash_timeout" and time.monotonic() - t0 < 5
    assert _left_behind(marker) == []


class _BrokenNotes:
    def note(self, *args: Any, **kw: Any) -> Any:
        raise RuntimeError("disk on fire")


def test_a_failure_before_the_gate_opens_means_the_command_never_runs(workspace: Path) -> None:
    ctx = ToolContext(session_id="s", turn_id="t", step_id="st", operation_id="op", workspace=str(workspace))
    env = ToolEnv(
        ctx=ctx,
        workspace=workspace,
        roots=(workspace,),
        deadline_s=20,
        services={"bash_groups": _BrokenNotes()},
    )
    with pytest.raises(RuntimeError):
        run_bash({"command": "touch ran"}, env)
    assert not (workspace / "ran").exists()
