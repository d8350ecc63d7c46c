"""The agent part of scripts/demo (no API key, no network): the scripted provider drives real tools.

Steps, each printed: start the tree; a prompt reads and edits a file through tools, with the approval
answered by the demo over the control socket; a SIGKILLed loop worker mid-turn, the turn resumed on another
worker and completed once; the effect receipts; a SIGKILLed executor mid-effect (a slow run_bash) reported
to the turn as uncertain at once, listed by `geode receipts --uncertain`, its leftover process group killed
at the call's deadline by the next executor, and reconciled with `geode reconcile`; the session resumed by
`geode ask --resume`, whose new effect runs; stop.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

VENV_BIN = Path(sys.executable).parent


def say(msg: str) -> None:
    print(f"\n== {msg}", flush=True)


def geode(
    *args: str, env: dict[str, str], cwd: Path, quiet: bool = False
) -> subprocess.CompletedProcess[str]:
    if not quiet:
        print(f"$ geode {' '.join(args)}", flush=True)
    r = subprocess.run(
        [str(VENV_BIN / "geode"), *args], env=env, cwd=cwd, text=True, capture_output=True, timeout=120
    )
    out = (r.stdout + r.stderr).rstrip()
    if out and not quiet:
        print(out, flush=True)
    return r


def _prompt_and_results(req: Any) -> tuple[str, int]:
    """The user text that started this turn and how many tool results followed it."""
    msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
    results = 0
    for m in reversed(msgs):
        content = m.get("content")
        if m.get("role") == "user" and isinstance(content, str):
            return content, results
        if isinstance(content, list):
            if any(b.get("type") == "tool_result" for b in content):
                results += 1
            elif m.get("role") == "user":
                return " ".join(b.get("text", "") for b in content), results
    return "", results


BUILD = "echo $$ > build.pgid; echo started >> build.log; sleep 30; echo finished >> build.log"
BUILD_TIMEOUT_S = 6  # the call's deadline: it holds even though the executor running it dies


def scripted(ws: Path):  # type: ignore[no-untyped-def]
    hello = str(ws / "hello.txt")
    notes = str(ws / "notes.txt")

    def reply(req: Any) -> Any:
        text, done = _prompt_and_results(req)
        if "fix" in text:
            steps = [
                {"tool_calls": [{"name": "read_file", "input": {"file_path": hello}}]},
                {
                    "tool_calls": [
                        {
                            "name": "edit_file",
                            "input": {"file_path": hello, "old_string": "wrold", "new_string": "world"},
                        }
                    ]
                },
                {"text": "Fixed the typo in hello.txt."},
            ]
            return steps[min(done, 2)]
        if "slowly" in text:
            return {"text": "Here is a slow, careful answer.", "delay_s": 2.0}
        if "notes" in text:
            if done == 0:
                content = "The build was interrupted; an operator reconciled it.\n"
                return {
                    "tool_calls": [{"name": "write_file", "input": {"file_path": notes, "content": content}}]
                }
            return {"text": "Wrote notes.txt."}
        if "build" in text:
            if done == 0:
                return {
                    "tool_calls": [
                        {"name": "run_bash", "input": {"command": BUILD, "timeout": BUILD_TIMEOUT_S}}
                    ]
                }
            return {"text": "The build's outcome is unknown; it needs an operator before I go on."}
        return {"text": "Earlier I fixed hello.txt and answered slowly; nothing else is pending."}

    return reply


def main() -> int:
    from actors.cli.client import ControlClient
    from actors.tree.client import tree_status
    from geode.home import GeodeHome
    from geode.protocol import lanes as lanes_msg
    from geode.testing.scripted import ScriptedServer

    base = Path(tempfile.mkdtemp(prefix="geode-agent-demo-"))
    ws = base / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text("hello wrold\n")
    server = ScriptedServer(scripted(ws)).start()
    home = GeodeHome(base / "home").ensure()
    home.config_file.write_text(
        f'[loop]\nworkers = 2\n[providers]\nmodel = "claude-sonnet-5"\n'
        f'[providers.anthropic]\nbase_url = "{server.base_url}"\n[tools]\nroots = ["{ws}"]\n'
    )
    home.env_file.write_text("ANTHROPIC_API_KEY=sk-demo-key\n")
    env = {**os.environ, "GEODE_HOME": str(home.root)}
    os.environ["GEODE_HOME"] = str(home.root)
    print(f"GEODE_HOME={home.root}\nworkspace={ws} (hello.txt: {(ws / 'hello.txt').read_text()!r})")
    try:
        say("start the tree")
        if geode("serve", env=env, cwd=ws).returncode != 0:
            return 1

        say("a prompt that reads and edits a file through tools; the demo answers the approval")
        cl = ControlClient(home)
        cl.connect(cwd=str(ws), is_tty=True)

        def show(ev: dict[str, Any]) -> None:
            d = ev.get("data") or {}
            if ev["kind"] in ("tool_start", "tool_end", lanes_msg.TURN_STARTED, lanes_msg.TURN_DONE):
                brief = {k: d[k] for k in ("name", "worker", "resume", "error") if k in d}
                print(f"   event {ev['kind']:<13} {json.dumps(brief)}", flush=True)

        def approve(d: dict[str, Any]) -> str:
            print(f"   ◆ approval asked for {d.get('tool_name')} ({d.get('safety_level')}) → demo answers y")
            return "y"

        r = cl.run_prompt(
            "please fix the greeting in hello.txt", on_event=show, on_approval=approve, timeout_s=60
        )
        print(f"   result: {r['termination_reason']}: {r['text']}")
        print(f"   hello.txt is now {(ws / 'hello.txt').read_text()!r}")

        say("SIGKILL the loop worker in the middle of a turn: lanes re-queues it, another worker resumes it")
        box: dict[str, Any] = {}
        started = threading.Event()

        def watch(ev: dict[str, Any]) -> None:
            show(ev)
            if ev["kind"] == lanes_msg.TURN_STARTED and "worker" not in box:
                box["worker"] = ev["data"]["worker"]
                started.set()

        th = threading.Thread(
            target=lambda: box.update(result=cl.run_prompt("answer slowly", on_event=watch, timeout_s=60))
        )
        th.start()
        started.wait(15)
        time.sleep(0.5)
        st = tree_status(home)
        pid = next(ch.pid for ch in (st.children if st else []) if ch.name == box.get("worker"))
        print(f"   kill -9 {pid} ({box['worker']})", flush=True)
        os.kill(int(pid or 0), signal.SIGKILL)
        th.join(60)
        res = box.get("result") or {}
        print(f"   result: {res.get('termination_reason')}: {res.get('text')}")
        sid = cl.session_id or ""

        say("effect receipts of this session (the edit was admitted and committed once)")
        geode("receipts", "--session", sid, env=env, cwd=ws)

        uncertain_ok = executor_crash(cl, home, ws, env, show, approve)
        cl.close()

        say("the session resumed by a new CLI process: its new effect runs (the quarantine is lifted)")
        r2 = geode(
            "ask",
            "--resume",
            sid,
            "now record what happened in notes.txt",
            "--dangerously-skip-permissions",
            env=env,
            cwd=ws,
        )
        print(f"   notes.txt: {(ws / 'notes.txt').read_text()!r}" if (ws / "notes.txt").exists() else "")
        say("status, then stop")
        geode("status", env=env, cwd=ws)
        ok = r2.returncode == 0 and res.get("termination_reason") == "natural" and uncertain_ok
        return 0 if ok and (ws / "notes.txt").exists() else 1
    finally:
        geode("stop", env=env, cwd=ws)
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


def executor_crash(cl: Any, home: Any, ws: Path, env: dict[str, str], show: Any, approve: Any) -> bool:
    """SIGKILL the executor while a slow run_bash runs; the turn learns at once; reconcile the receipt."""
    from actors.tree.client import tree_status

    say("SIGKILL the executor while a slow effect (run_bash) runs: the turn gets effect_outcome_uncertain")
    box: dict[str, Any] = {}
    th = threading.Thread(
        target=lambda: box.update(
            result=cl.run_prompt("run the slow build", on_event=show, on_approval=approve, timeout_s=90)
        )
    )
    th.start()
    log = ws / "build.log"
    deadline = time.monotonic() + 30
    while not log.exists() and time.monotonic() < deadline:  # admitted, then dispatched: it is running
        time.sleep(0.05)
    st = tree_status(home)
    ex = next(ch for ch in (st.children if st else []) if ch.name == "executor")
    print(
        f"   build.log says {log.read_text()!r}: the handler runs; "
        f"kill -9 {ex.pid} (executor#{ex.incarnation})"
    )
    os.kill(int(ex.pid or 0), signal.SIGKILL)
    t0 = time.monotonic()
    th.join(60)
    res = box.get("result") or {}
    print(f"   the turn ended {time.monotonic() - t0:.2f}s after the kill: {res.get('termination_reason')}")
    print("   (the answer waits for an operator: an unresolved effect makes Verify escalate)")

    say("the receipt is uncertain: its executor died while it ran; it is never re-run by itself")
    geode("receipts", "--uncertain", env=env, cwd=ws)
    rows = json.loads(geode("receipts", "--uncertain", "--json", env=env, cwd=ws, quiet=True).stdout or "[]")
    if not rows:
        return False
    op = rows[0]["operation_id"]

    say("the dead executor's deadline still holds: the next incarnation kills the leftover group at it")
    pgid = int((ws / "build.pgid").read_text())
    gone_by = time.monotonic() + BUILD_TIMEOUT_S + 15
    while _group_alive(pgid) and time.monotonic() < gone_by:
        time.sleep(0.1)
    said: list[str] = []
    while time.monotonic() < gone_by and not any("killed at its deadline" in ln for ln in said):
        lines = (home.logs_dir / "executor.log").read_text().splitlines()  # the line follows the kill
        said = [ln for ln in lines if f"orphaned run_bash group {pgid} " in ln]
        time.sleep(0.1)
    print(f"   group {pgid} {'still runs!' if _group_alive(pgid) else 'is gone'}; executor.log says:")
    for ln in said:
        print(f"   {ln}")
    say("the operator looks (build.log), then reconciles: the outcome is still theirs to state")
    print(f"   build.log: {log.read_text()!r}")
    note = "the build started but never finished; its group was killed at its deadline"
    rec = geode("reconcile", op, "--outcome", "not-applied", "--note", note, env=env, cwd=ws)
    geode("receipts", "--uncertain", env=env, cwd=ws)
    return (
        rec.returncode == 0
        and not _group_alive(pgid)
        and res.get("termination_reason") == "external_verification_required"
        and log.read_text() == "started\n"  # the handler ran once; the new executor never re-ran it
    )


def _group_alive(pgid: int) -> bool:
    """Whether a process group has a live (non-zombie) member."""
    from geode.tools.builtin.bash_groups import proc_stat

    procs = (int(e.name) for e in os.scandir("/proc") if e.name.isdigit())
    return any((st := proc_stat(pid)) is not None and st[0] == pgid for pid in procs)


if __name__ == "__main__":
    sys.exit(main())
