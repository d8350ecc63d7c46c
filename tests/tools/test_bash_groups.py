"""The orphan reaper with real process groups: overdue groups die at once, pending ones at their deadline
(SIGTERM, then SIGKILL after the grace), an unmatched (reused) pid is left alone, live owners keep notes;
setsid'd members die by their token, a member without the token by the call's cgroup."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from geode.tools.builtin.bash import run_bash
from geode.tools.builtin.bash_containment import (
    cgroup_pids,
    kill_cgroup,
    make_cgroup,
    own_cgroup,
    remove_cgroup,
    sweep_empty,
    token_holders,
)
from geode.tools.builtin.bash_groups import (
    TOKEN_ENV,
    GroupNote,
    GroupNotes,
    GroupReaper,
    boot_clock,
    proc_stat,
    start_ticks,
)
from geode.tools.handlers import ToolEnv
from geode.tools.spec import ToolContext
from tests.processes import Child
from tests.waiting import poll_for


def members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a group."""
    out = []
    for e in os.scandir("/proc"):
        if e.name.isdigit() and (st := proc_stat(int(e.name))) is not None and st[0] == pgid:
            out.append(int(e.name))
    return out


def wait_gone(pgid: int, timeout_s: float = 5.0) -> float:
    t0 = time.monotonic()
    poll_for(lambda: not members(pgid), timeout_s, what=f"every process of group {pgid} gone")
    return time.monotonic() - t0


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(5)


def spawn(procs: list[subprocess.Popen[bytes]], script: str, token: str) -> subprocess.Popen[bytes]:
    p = Child(
        ["/bin/bash", "-c", script],
        start_new_session=True,
        env={**os.environ, TOKEN_ENV: token},
        stdout=subprocess.PIPE,
    )
    procs.append(p)
    poll_for(lambda: members(p.pid), 5, interval_s=0.01, what=f"group {p.pid} running")
    return p


def dead_owner() -> tuple[int, int | None]:
    """The pid of a process that has exited (and been reaped), with a start time that cannot match."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid, 1


def write_note(d: Path, pgid: int, token: str, *, in_s: float, grace_s: float = 0.3, **kw: object) -> Path:
    owner_pid, owner_start = dead_owner()
    note = GroupNote(
        pgid=pgid,
        start_ticks=kw.pop("start_ticks", start_ticks(pgid)),  # type: ignore[arg-type]
        token=token,
        operation_id="op-test",
        session_id="s-test",
        owner="executor#1",
        owner_pid=owner_pid,
        owner_start_ticks=owner_start,
        deadline_boot_s=boot_clock() + in_s,
        grace_s=grace_s,
        deadline_unix=time.time() + in_s,
    )
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{pgid}-{token}.json"
    path.write_text(note.model_dump_json())
    return path


def test_overdue_group_is_killed_with_its_background_children(tmp_path: Path, spawned: list) -> None:
    p = spawn(spawned, "sleep 60 & sleep 60", "tok-a")
    poll_for(lambda: len(members(p.pid)) >= 3, 5, interval_s=0.01, what="bash and its two sleeps")
    note = write_note(tmp_path, p.pid, "tok-a", in_s=-10)
    seen: list[str] = []
    reaper = GroupReaper(tmp_path, report=lambda n, a: seen.append(a))
    assert reaper.reap() == {note.name: "killed"}
    wait_gone(p.pid)
    assert p.wait(5) == -signal.SIGKILL
    assert not note.exists() and seen == ["killed"]


def test_pending_group_is_killed_at_its_deadline_then_after_the_grace(tmp_path: Path, spawned: list) -> None:
    p = spawn(spawned, "trap '' TERM; sleep 60", "tok-b")  # ignores SIGTERM: only the SIGKILL ends it
    note = write_note(tmp_path, p.pid, "tok-b", in_s=0.5, grace_s=0.4)
    seen: list[str] = []
    reaper = GroupReaper(tmp_path, report=lambda n, a: seen.append(a))
    t0 = time.monotonic()
    assert reaper.reap() == {note.name: "scheduled"}
    assert members(p.pid) and note.exists()  # still running within its deadline; the note is kept
    wait_gone(p.pid)
    took = time.monotonic() - t0
    assert 0.8 <= took < 3.0, took
    for t in reaper.threads:
        t.join(2)
    assert not note.exists() and seen == ["scheduled", "killed"]


def test_a_group_that_obeys_sigterm_ends_at_the_deadline_without_the_grace(
    tmp_path: Path, spawned: list
) -> None:
    p = spawn(spawned, "sleep 60", "tok-g")
    note = write_note(tmp_path, p.pid, "tok-g", in_s=0.4, grace_s=30)
    seen: list[str] = []
    reaper = GroupReaper(tmp_path, report=lambda n, a: seen.append(a))
    t0 = time.monotonic()
    assert reaper.reap() == {note.name: "scheduled"}
    for t in reaper.threads:
        t.join(5)
    assert 0.35 <= time.monotonic() - t0 < 2.0
    assert p.wait(1) == -signal.SIGTERM and seen == ["scheduled", "killed"] and not note.exists()


def test_a_pid_that_does_not_match_is_left_alone_and_the_note_removed(tmp_path: Path, spawned: list) -> None:
    p = spawn(spawned, "sleep 60", "tok-c")
    real = start_ticks(p.pid)
    assert real is not None
    note = write_note(tmp_path, p.pid, "some-other-token", in_s=-10, start_ticks=real + 1)  # "reused" pid
    assert GroupReaper(tmp_path).reap() == {note.name: "not_ours"}
    time.sleep(0.2)  # nothing to wait for: the assertion is that nothing happens
    assert p.poll() is None and members(p.pid)
    assert not note.exists()


def test_a_group_whose_leader_exited_is_found_by_its_token(tmp_path: Path, spawned: list) -> None:
    p = spawn(spawned, "sleep 60 >/dev/null & echo $!", "tok-d")
    assert p.stdout is not None
    bg = int(p.stdout.readline())
    p.wait(5)  # the leader is gone; its background child keeps the group
    assert members(p.pid) == [bg]
    note = write_note(tmp_path, p.pid, "tok-d", in_s=-1, start_ticks=12345)
    assert GroupReaper(tmp_path).reap() == {note.name: "killed"}
    wait_gone(p.pid)


def test_gone_groups_and_broken_notes_are_removed(tmp_path: Path) -> None:
    p = subprocess.Popen(["true"], start_new_session=True)
    p.wait()
    gone = write_note(tmp_path, p.pid, "tok-e", in_s=5, start_ticks=7)
    (tmp_path / "junk.json").write_text("{not json")
    assert GroupReaper(tmp_path).reap() == {gone.name: "gone", "junk.json": "unreadable"}
    assert list(tmp_path.iterdir()) == []


def test_notes_of_a_live_owner_are_kept(tmp_path: Path, spawned: list) -> None:
    p = spawn(spawned, "sleep 60", "tok-f")
    notes = GroupNotes(tmp_path, "executor#2")  # this process: alive
    path = notes.note(p.pid, "tok-f", operation_id="op", session_id="s", timeout_s=-5, grace_s=0)
    assert GroupReaper(tmp_path).reap() == {}
    assert path.exists() and p.poll() is None


def test_run_bash_notes_its_group_while_it_runs_and_forgets_it_after(tmp_path: Path) -> None:
    d = tmp_path / "groups"
    ctx = ToolContext(
        session_id="s1", turn_id="t", step_id="st", operation_id="op-7", workspace=str(tmp_path)
    )
    env = ToolEnv(
        ctx=ctx,
        workspace=tmp_path,
        roots=(tmp_path,),
        deadline_s=20,
        services={"bash_groups": GroupNotes(d, "executor#3")},
    )
    # the note is written just after the fork: wait for it
    wait = f"for i in $(seq 100); do ls {d}/*.json >/dev/null 2>&1 && break; sleep 0.02; done"
    out = run_bash({"command": f'{wait}; cat {d}/*.json; echo; echo "${TOKEN_ENV}"', "timeout": 5}, env)
    note_json, token = out["stdout"].strip().splitlines()
    note = GroupNote.model_validate_json(note_json)
    assert (note.pgid, note.operation_id, note.session_id, note.owner) == (
        out["pgid"],
        "op-7",
        "s1",
        "executor#3",
    )
    assert note.token == token and note.owner_pid == os.getpid()
    assert 4 < note.deadline_boot_s - boot_clock() <= 5 and note.grace_s == 2.0
    assert list(d.iterdir()) == []  # reaped normally: nothing left for a later incarnation


def _holders(token: str) -> list[int]:
    return [p.pid for p in token_holders(token)]


def test_a_dead_executors_setsid_members_are_killed_by_token(tmp_path: Path, spawned: list) -> None:
    """Issue 10 finding 3 for the next incarnation: a `setsid -f` member has its own group and session."""
    p = spawn(spawned, "setsid -f sleep 60; nohup setsid sleep 60 >/dev/null 2>&1 & sleep 60", "tok-h")
    poll_for(lambda: len(_holders("tok-h")) >= 4, 5, interval_s=0.01, what="bash, two setsid'd sleeps, sleep")
    escaped = [pid for pid in _holders("tok-h") if (st := proc_stat(pid)) is not None and st[0] != p.pid]
    assert escaped, "the setsid'd sleeps are in groups of their own"
    note = write_note(tmp_path, p.pid, "tok-h", in_s=-10)
    assert GroupReaper(tmp_path).reap() == {note.name: "killed"}
    assert _holders("tok-h") == [] and p.wait(5) == -signal.SIGKILL


@pytest.mark.skipif(own_cgroup() is None, reason="no writable cgroup v2 here")
def test_a_dead_executors_cgroup_is_killed_and_removed(tmp_path: Path, spawned: list) -> None:
    """A member that cleared its environment (no token) is still in the call's cgroup."""
    tok = f"tok-i-{secrets.token_hex(4)}"
    cg = make_cgroup(tok, own_cgroup())
    assert cg is not None
    try:
        p = Child(
            ["/bin/bash", "-c", "read -r _; env -i setsid -f sleep 60; sleep 60"],
            start_new_session=True,
            stdin=subprocess.PIPE,
            env={**os.environ, TOKEN_ENV: tok},
        )
        spawned.append(p)
        (cg / "cgroup.procs").write_text(str(p.pid))
        assert p.stdin is not None
        p.stdin.write(b"go\n")
        p.stdin.flush()
        tokenless: set[int] = poll_for(  # the env -i'd sleep, once it has exec'd
            lambda: {pid for pid in cgroup_pids(cg) if pid != p.pid} - set(_holders(tok)),
            5,
            interval_s=0.01,
            what="a member without the token in the cgroup",
        )
        note = write_note(tmp_path, p.pid, tok, in_s=-10)
        body = GroupNote.model_validate_json(note.read_text()).model_copy(update={"cgroup": str(cg)})
        note.write_text(body.model_dump_json())
        assert GroupReaper(tmp_path).reap() == {note.name: "killed"}
        assert not cg.exists() and p.wait(5) == -signal.SIGKILL
        assert all(proc_stat(pid) is None for pid in tokenless)
    finally:
        if cg.exists():
            kill_cgroup(cg)
            remove_cgroup(cg)


@pytest.mark.skipif(own_cgroup() is None, reason="no writable cgroup v2 here")
def test_empty_leftover_cgroups_are_swept_populated_ones_kept(spawned: list) -> None:
    parent = own_cgroup()
    assert parent is not None
    empty = make_cgroup(f"sweep-e-{secrets.token_hex(4)}", parent)
    busy = make_cgroup(f"sweep-b-{secrets.token_hex(4)}", parent)
    assert empty is not None and busy is not None
    try:
        p = spawn(spawned, "sleep 60", "tok-sweep")
        (busy / "cgroup.procs").write_text(str(p.pid))
        sweep_empty(parent, min_age_s=3600)
        assert empty.exists()  # too young to be a leftover
        sweep_empty(parent, min_age_s=0)
        assert not empty.exists() and busy.exists()
    finally:
        for d in (empty, busy):
            if d.exists():
                kill_cgroup(d)
                remove_cgroup(d)
