"""`geode doctor` checks: config, provider keys (presence only), socket, daemon version, stale files."""

from __future__ import annotations

import os
import stat
from typing import Any

from actors.cli.trust_cmds import trust_notes as _trust_notes
from geode.home import GeodeHome
from geode.protocol.errors import GeodeError


def _check(name: str, ok: bool, detail: str, *, warn: bool = False, unused: bool = False) -> dict[str, Any]:
    return {"name": name, "ok": ok, "detail": detail, "warn": warn, "unused": unused}


def run_checks(home: GeodeHome) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    from actors.tree.config_sections import TreeSettings, check_home_config

    report = check_home_config(home)  # the full check of the file (geode.config_file reads it)
    settings = TreeSettings.from_raw(report.config) if report.ok else TreeSettings()
    for line in report.errors:
        out.append(_check("config", False, line))
    for line in report.warnings:
        out.append(_check("config", True, line, warn=True))
    if report.ok:
        state = "present" if report.path.exists() else "absent: defaults"
        out.append(_check("config", True, f"{home.config_file} ({state}, valid)"))
        out.extend(_check("mcp", True, n, warn=True) for n in _trust_notes(home, settings))
        from actors.cli.webhooks_view import doctor_checks as webhook_checks

        out.extend(webhook_checks(home, report.config))  # a route's secret missing; an open listener
        out.extend(_memory_checks(home, settings.memory.max_bytes))
        from actors.cli.skills_cmds import doctor_checks as skill_checks

        out.extend(skill_checks(home, settings.trust.projects))  # a skill folder that failed to parse
    out.extend(_secret_file_checks(home))
    out.append(_bash_check(settings.tools.bash.pid_namespace))
    try:
        from geode.providers.report import provider_report

        report = provider_report(home=home)
        usable = [r for r in report if r.usable]
        for r in report:  # only the selected provider's missing key is an error; the others are unused
            if r.usable or r.selected:
                out.append(_check(f"key:{r.provider}", r.usable, r.line()))
            else:
                out.append(_check(f"key:{r.provider}", True, f"{r.line()} (not used)", unused=True))
        out.append(_check("providers", bool(usable), f"{len(usable)} of {len(report)} usable"))
    except Exception as exc:  # a broken provider config must not hide the rest of the report
        out.append(_check("providers", False, f"{type(exc).__name__}: {exc}"[:300]))
    out.extend(_socket_checks(home))
    from actors.cli.schedule_view import doctor_checks

    out.extend(doctor_checks(home))  # disabled (an error) or failing (a warning) scheduled jobs
    if _lock_held(home):  # what the running daemon uses, and whether this shell would differ
        from actors.cli.provider_view import daemon_checks

        out.extend(daemon_checks(home))
    return out


def _memory_checks(home: GeodeHome, cap: int) -> list[dict[str, Any]]:
    """A MEMORY.md edited by hand past ``[memory] max_bytes``: a warning (the prompt loads its beginning)."""
    from geode.memory.files import over_cap

    return [
        _check(
            "memory",
            True,
            f"{p} is {n} bytes, past the {cap}-byte cap: only its beginning is loaded",
            warn=True,
        )
        for p, n in over_cap(home.root, cap)
    ]


def _bash_check(enabled: bool) -> dict[str, Any]:
    """Whether each run_bash call gets a PID namespace here (else a process of a command can outlive it);
    ``enabled`` is ``[tools.bash] pid_namespace``."""
    from geode.tools.builtin.bash import pidns_line, pidns_probe

    holds, line = pidns_line(enabled, pidns_probe() if enabled else "off")
    return _check("run_bash", True, line, warn=not holds)


def _secret_file_checks(home: GeodeHome) -> list[dict[str, Any]]:
    """A group/world-readable ``.env`` hands the provider keys to every local user: say so."""
    from geode.private_dir import loose_mode

    mode = loose_mode(home.env_file)
    if mode is None:
        return []
    detail = (
        f"{home.env_file} is mode {mode:04o}: other local users can read your keys "
        f"(run `chmod 600 {home.env_file}`; `geode serve` tightens it at start)"
    )
    return [_check("secrets", False, detail, warn=True)]


def _socket_checks(home: GeodeHome) -> list[dict[str, Any]]:
    from actors.cli.daemon_start import control_answers
    from actors.control import geode_version

    out: list[dict[str, Any]] = []
    sock, lock = home.cli_socket, home.lock_file
    serve_held = _lock_held(home)
    if not sock.exists():
        out.append(
            _check(
                "socket",
                not serve_held,
                f"{sock} absent"
                + (" (daemon not running)" if not serve_held else " but the daemon holds its lock"),
            )
        )
    else:
        mode = stat.S_IMODE(sock.stat().st_mode)
        dmode = stat.S_IMODE(sock.parent.stat().st_mode)
        perms_ok = mode & 0o077 == 0 and dmode & 0o077 == 0
        answers = control_answers(home)
        detail = f"{sock} mode {mode:o} dir {dmode:o}"
        if not answers:
            detail += " · stale: nothing answers (remove it or run `geode serve`)"
        out.append(_check("socket", perms_ok and answers, detail))
        if answers:
            out.append(_version_check(home, geode_version()))
    if lock.exists() and not serve_held:
        out.append(_check("serve lock", True, f"{lock} left over by a stopped daemon (harmless)", warn=True))
    startup = home.startup_lock
    if startup.exists() and not _flock_free(startup):
        out.append(_check("startup lock", True, "a CLI is starting the daemon right now", warn=True))
    return out


def _version_check(home: GeodeHome, cli_version: str) -> dict[str, Any]:
    from actors.cli.client import ControlClient

    cl = ControlClient(home, client_version=cli_version)
    try:
        w = cl.connect(timeout_s=2.0)
        daemon = str(w.get("server_version", "?"))
        same = daemon == cli_version
        hint = "" if same else " · restart the daemon (`geode stop && geode serve`)"
        return _check("daemon version", same, f"daemon {daemon} · cli {cli_version}{hint}")
    except GeodeError as exc:
        return _check("daemon version", False, f"handshake failed: {exc}")
    finally:
        cl.close()


def _lock_held(home: GeodeHome) -> bool:
    try:
        from actors.tree.instance_lock import InstanceLock

        return InstanceLock(home.lock_file).is_held()
    except Exception:
        return False


def _flock_free(path: os.PathLike[str]) -> bool:
    import fcntl

    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
