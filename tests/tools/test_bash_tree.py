"""A real `geode serve` tree whose scripted model proposes run_bash (issue 10): finding 1, a "read-only"
pipeline (`cat payload | sort --compress-program=sh`) no longer runs without a person, so `geode ask` without
a terminal denies it and nothing is written; finding 3, with --dangerously-skip-permissions `setsid`,
`setsid -f` and double forks leave no process once the call returns; and the shell sees no secret. Issue
26: a process that leaves the call's cgroup, drops its environment and kills its subreaper still dies with
the call (its PID namespace); a command cannot drive the daemon through the control socket; with
`[tools.bash] pid_namespace = false` the result says the call ran without one."""

from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.scripted import ScriptedServer
from geode.tools.builtin.bash_containment import cgroup2_mount
from tests.actors.tree_kit import ROOT, children, geode, scripted_tree, tool_results, wait_children, wait_for

PREFIX = "run: "


@dataclass
class Rig:
    home: GeodeHome
    model: ScriptedServer
    ws: Path
    outside: Path


def _reply(req: Any) -> Any:
    """Run the command after "run: " in the prompt; after the tool result, a final text."""
    msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
    content = msgs[-1].get("content") if msgs else ""
    if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
        return {"text": "done"}
    text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [])
    return {"tool_calls": [{"name": "run_bash", "input": {"command": text.split(PREFIX, 1)[1]}}]}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    base = tmp_path_factory.mktemp("bashtree")
    ws, outside = base / "ws", base / "outside"
    ws.mkdir()
    outside.mkdir()
    with scripted_tree(base, _reply, ws, cwd=ws) as (home, model):
        yield Rig(home, model, ws, outside)


def _ask(rig: Rig, prompt: str, *flags: str) -> dict[str, Any]:
    r = geode(rig.home, "ask", prompt, "--json", *flags, cwd=rig.ws, timeout=90)
    out = json.loads(r.stdout)
    assert out["text"] == "done", r.stdout + r.stderr
    return out


def _timeline(rig: Rig, session: str) -> list[dict[str, Any]]:
    r = geode(rig.home, "timeline", session, "--json", timeout=30)
    assert r.returncode == 0, r.stderr
    return [row["event"] for row in json.loads(r.stdout)]


def _left_behind(marker: str) -> list[int]:
    found = []
    for e in os.scandir("/proc"):
        if e.name.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{e.name}/cmdline").read_bytes():
                    found.append(int(e.name))
            except OSError:
                pass
    return found


def test_finding1_sort_compress_program_is_not_run_without_a_person(rig: Rig) -> None:
    target = rig.outside / f"f1-{uuid.uuid4().hex[:8]}"
    (rig.ws / "payload.txt").write_text(f"touch {target}\n" * 30000)
    tag = f"f1-{uuid.uuid4().hex[:8]}"
    out = _ask(rig, f"{tag} {PREFIX}cat payload.txt | sort -S 64K --compress-program=sh | head -1")
    [result] = tool_results(rig.model, tag)
    assert "permission_denied" in result, result
    assert not target.exists()
    events = wait_for(
        lambda: [e for e in _timeline(rig, out["session_id"]) if e["kind"].startswith("tool.")],
        what="no tool row in the timeline",
    )
    # geode ask without a terminal: nobody could be asked (not "the user denied"), and the timeline says so
    rows = [(e["kind"], e["payload"]["summary"]["approval"]) for e in events]
    assert rows == [("tool.denied", "no_terminal")]
    assert out.get("approvals_unasked"), out
    assert not any(e["payload"].get("approval") == "read_only" for e in events)


def test_finding3_setsid_leaves_no_process_after_the_call(rig: Rig) -> None:
    marker = f"300.{os.getpid()}{uuid.uuid4().int % 10**6:06d}"
    cmd = (
        f"setsid sleep {marker} & nohup setsid sleep {marker} >/dev/null 2>&1 & setsid -f sleep {marker}; "
        f"(sleep {marker} &) & env -i setsid -f sleep {marker}; sleep 0.2; echo started-{marker}"
    )
    tag = f"f3-{uuid.uuid4().hex[:8]}"
    _ask(rig, f"{tag} {PREFIX}{cmd}", "--dangerously-skip-permissions")
    assert _left_behind(marker) == []
    [result] = tool_results(rig.model, tag)
    assert f"started-{marker}" in result, result


def test_the_shell_sees_no_secret_and_no_home(rig: Rig) -> None:
    tag = f"env-{uuid.uuid4().hex[:8]}"
    cmd = "env; cat $GEODE_HOME/.env; tr '\\0' '\\n' < /proc/$PPID/environ; echo end-of-env"
    _ask(rig, f"{tag} {PREFIX}{cmd}", "--dangerously-skip-permissions")
    [result] = tool_results(rig.model, tag)
    assert "end-of-env" in result and "PATH=" in result, result
    assert "sk-test-key" not in result and "GEODE_HOME=" not in result and str(rig.home.root) not in result


def _kill_left(marker: str) -> None:
    for pid in _left_behind(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# a `setsid env -i` child moves itself to the root cgroup, walks up its ancestry to the call's subreaper
# and SIGKILLs it, then sleeps; the shell waits until it did all that, then ends the call (the pattern's
# [r] keeps it from matching the shell, whose command line holds this text)
ESCAPE = (
    'setsid env -i /bin/sh -c \'{move} p=$$; while [ "$p" -gt 0 ]; do p=$(cut -d" " -f4 /proc/$p/stat); '
    'case "$(tr "\\0" " " < /proc/$p/cmdline)" in *bash_subreape[r].py*) kill -9 $p; break;; esac; done; '
    "touch {flag}; exec sleep {marker}' & "
    "i=0; while [ ! -e {flag} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; echo probe-{marker}"
)


def test_an_escaped_process_that_kills_its_subreaper_still_dies_with_the_call(rig: Rig) -> None:
    marker = f"300.{os.getpid()}{uuid.uuid4().int % 10**6:06d}"
    root = cgroup2_mount()
    move = f"echo 0 > {root}/cgroup.procs;" if root is not None else ""
    flag = rig.outside / f"escaped-{marker}"
    tag = f"esc-{uuid.uuid4().hex[:8]}"
    try:
        _ask(
            rig,
            f"{tag} {PREFIX}{ESCAPE.format(move=move, flag=flag, marker=marker)}",
            "--dangerously-skip-permissions",
        )
        assert flag.exists(), "the probe did not run"
        wait_for(lambda: _left_behind(marker) == [], timeout_s=5, what="the escaped process to die")
        [result] = tool_results(rig.model, tag)
        assert f"probe-{marker}" in result and "pid_namespace" in result, result
    finally:
        _kill_left(marker)


def test_a_command_cannot_drive_the_daemon_through_the_control_socket(rig: Rig) -> None:
    """The probe of issue 26: an approved command runs `geode ask --dangerously-skip-permissions` against the
    daemon's home; control refuses the connection (it is inside a run_bash call) and logs it."""
    inner, target = f"inner-{uuid.uuid4().hex[:8]}", rig.outside / f"ctl-{uuid.uuid4().hex[:8]}"
    log = rig.home.logs_dir / "control.log"
    said = "inside a run_bash call"
    cli = (
        f"n0=$(grep -c '{said}' {log} 2>/dev/null); GEODE_HOME={rig.home.root} PYTHONPATH={ROOT} "
        f"{sys.executable} -m actors.cli.main ask '{inner} {PREFIX}touch {target}' "
        "--dangerously-skip-permissions --json & c=$!; i=0; "  # until control logged its refusal (or 15 s)
        f'while [ "$(grep -c \'{said}\' {log} 2>/dev/null)" -le "${{n0:-0}}" ] && [ $i -lt 300 ]; '
        "do sleep 0.05; i=$((i+1)); done; sleep 1; kill $c 2>/dev/null; wait $c; echo cli-rc=$?"
    )
    tag = f"ctl-{uuid.uuid4().hex[:8]}"
    _ask(rig, f"{tag} {PREFIX}{cli}", "--dangerously-skip-permissions")
    [result] = tool_results(rig.model, tag)
    assert "cli-rc=" in result and "cli-rc=0" not in result, result
    assert not target.exists()
    assert not _asked(rig, inner), "the inner turn reached the model"
    text = log.read_text()
    assert "control socket: refused pid" in text and f"{said}'s PID namespace" in text, text[-2000:]


def _asked(rig: Rig, marker: str) -> bool:
    """Whether a conversation whose first message starts with ``marker`` reached the model."""
    for r in rig.model.requests:
        msgs = r.body.get("messages", []) if isinstance(r.body, dict) else []
        first = msgs[0].get("content") if msgs else ""
        text = first if isinstance(first, str) else " ".join(b.get("text", "") for b in first or [])
        if text.startswith(marker):
            return True
    return False


def _restart_executor(rig: Rig) -> None:
    before = children(rig.home)["executor"].incarnation
    r = geode(rig.home, "restart", "executor", timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    wait_children(
        rig.home,
        lambda k: k["executor"].state == "running" and k["executor"].incarnation > before,
        timeout_s=60,
    )


def _reload(rig: Rig) -> None:
    r = geode(rig.home, "reload", timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_without_a_pid_namespace_the_result_says_so(rig: Rig) -> None:
    cfg = rig.home.config_file.read_text()
    rig.home.config_file.write_text(cfg + "\n[tools.bash]\npid_namespace = false\n")
    try:
        _reload(rig)  # a restarted child starts on the tree's validated copy: `geode reload` makes it
        _restart_executor(rig)
        tag = f"nons-{uuid.uuid4().hex[:8]}"
        _ask(rig, f"{tag} {PREFIX}echo $$", "--dangerously-skip-permissions")
        [result] = tool_results(rig.model, tag)
        body = json.loads(json.loads(result)["content"])
        assert body["containment"] == "subreaper", body
        assert "without a PID namespace (turned off: [tools.bash] pid_namespace = false)" in body["note"]
        assert body["stdout"].strip() == str(body["pgid"])  # the shell's own pid: no namespace of its own
    finally:
        rig.home.config_file.write_text(cfg)
        _reload(rig)
        _restart_executor(rig)
