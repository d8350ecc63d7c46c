"""``geode serve --foreground``: lock the home, start the supervisor endpoint and run the tree to the end
(a worker host, ``--role worker``: only its loop workers and/or executor; their deaths are told to main)."""

from __future__ import annotations

import logging
import os
import sys

from actors.bus import Bus
from actors.tree import process_logging
from actors.tree.child_died import DEFAULT_TARGETS, ChildDiedNotifier
from actors.tree.child_handle import IncarnationStore
from actors.tree.children import child_names, tree_specs
from actors.tree.config_sections import EXIT_CONFIG, TreeSettings, start_settings
from actors.tree.instance_lock import InstanceLock
from actors.tree.metrics_page import MetricsPage, metrics_off
from actors.tree.provider_sdks import configured_env, provider_sdks
from actors.tree.service import SupervisorService
from actors.tree.single_process import SingleProcessTree
from actors.tree.supervisor import Supervisor
from actors.tree.worker_role import WorkerRole
from actors.tree.zygote import PROVIDERS_ENV, WARM_ENV
from actors.tree.zygote_client import Zygote
from geode.config_check import ConfigReport
from geode.config_file import remember_good
from geode.config_reload import remember_env
from geode.config_source import ConfigSource
from geode.home import GeodeHome
from geode.private_dir import tighten_file
from geode.protocol.errors import GeodeError

log = logging.getLogger(__name__)
ENDPOINT = "supervisor"
EXIT_ALREADY_RUNNING = 3
__all__ = ["EXIT_ALREADY_RUNNING", "EXIT_CONFIG", "already_running_message", "run_foreground"]


def already_running_message(home: GeodeHome, pid: int | None) -> str:
    from actors.tree.client import in_process_tree

    if (inside := in_process_tree(home)) is not None:
        return f"{inside}; `geode serve` can start once that process exits"
    who = f" (pid {pid})" if pid else ""
    return (
        f"geode serve is already running for GEODE_HOME={home.root}{who}; "
        "use `geode status`, or `geode stop` first"
    )


def run_foreground(home: GeodeHome, *, single_process: bool = False, zygote: Zygote | None = None) -> int:
    """Run the tree until stopped. Exit codes: 0 stopped, 1 restart intensity exceeded, 3 already running.
    ``zygote``: started early by ``actors.tree.daemon_main``; stopped at once when the tree does not use
    it."""
    try:
        return _run_foreground(home, single_process, zygote)
    finally:
        if zygote is not None and not zygote.adopted:
            zygote.abandon()


def _run_foreground(home: GeodeHome, single_process: bool, zygote: Zygote | None) -> int:
    home.ensure()
    try:
        home.ensure_run_dir()  # refuses a run dir another user could reach: one line, before any child
    except GeodeError as exc:
        print(f"geode serve: {exc.message or exc}", file=sys.stderr)
        print("geode serve: refusing to start; no child was started", file=sys.stderr)
        return EXIT_CONFIG
    lock = InstanceLock(home.lock_file)
    if not lock.acquire():
        print(already_running_message(home, lock.holder_pid()), file=sys.stderr)
        return EXIT_ALREADY_RUNNING
    try:
        return _run_locked(home, single_process, zygote)
    except GeodeError as exc:
        print(f"geode serve: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    finally:
        _remove_stale_sockets(home)
        lock.release()


def _run_locked(home: GeodeHome, single_process: bool, zygote: Zygote | None) -> int:
    # before any child: a bad config refuses the start, one line per problem (the same check as --repl)
    settings, report = start_settings(home, prog="geode serve")
    if settings is None:
        return EXIT_CONFIG
    remember_good(home, report.source)  # what the tree serves on while the file is broken later
    remember_env(home)  # which .env keys `geode reload` finds changed (digests only)
    role = WorkerRole.from_env()
    refusal = _tcp_refusal(home, settings, role, single_process)
    if refusal:
        print(f"geode serve: {refusal}", file=sys.stderr)
        print("geode serve: refusing to start; no child was started", file=sys.stderr)
        return EXIT_CONFIG
    try:  # before the zygote and any child: prometheus_client reads its directory at import
        page = MetricsPage(home, settings.metrics) if settings.metrics.listen else None
        if page is None:
            metrics_off()
    except GeodeError as exc:
        print(f"geode serve: {exc.message or exc}", file=sys.stderr)
        print("geode serve: refusing to start; no child was started", file=sys.stderr)
        return EXIT_CONFIG
    try:
        return _run_tree(home, settings, report, role, single_process, page, zygote)
    finally:
        if page is not None:
            page.stop()


def _run_tree(
    home: GeodeHome,
    settings: TreeSettings,
    report: ConfigReport,
    role: WorkerRole | None,
    single_process: bool,
    page: MetricsPage | None,
    zygote: Zygote | None = None,
) -> int:
    names = child_names(settings, role, daemon=True)
    incarnations = IncarnationStore(home.root / "incarnations.json")
    inc = incarnations.next(ENDPOINT)
    process_logging.configure(home, ENDPOINT, inc, settings=settings)
    for line in report.warnings:
        log.warning("config: %s", line)
    loose = tighten_file(home.env_file)
    if loose is not None:
        log.warning("%s was mode %04o (group/world-readable); tightened to 0600", home.env_file, loose)
    _remove_stale_sockets(home)
    bus = Bus(ENDPOINT, inc, home).start()  # always ipc: the CLI reaches it from outside
    tree: Supervisor | SingleProcessTree
    if single_process:
        if zygote is not None:
            zygote.abandon()  # no child to fork
        source = ConfigSource(home, TreeSettings.from_raw, tree=True)  # the copy just remembered
        tree = SingleProcessTree(names, home, source, incarnations)
    else:
        env = {"GEODE_HOME": str(home.root), "PYTHONUNBUFFERED": "1", **(role.env() if role else {})}
        env.update(page.env if page is not None else {})
        if "messengers" in names and (sdks := settings.messengers.sdk_modules()):
            env[WARM_ENV] = ",".join(sdks)  # the zygote imports them: a restarted messengers child is quick
        env[PROVIDERS_ENV] = ",".join(provider_sdks(settings, configured_env(home)))  # not every vendor's SDK
        tree = Supervisor(
            tree_specs(settings, role=role, daemon=True),
            settings.supervisor.tree,
            logs_dir=home.logs_dir,
            incarnations=incarnations,
            env=env,
            publish=bus.publish,
            zygote=zygote,
        )
    remote_bus: Bus | None = None
    if role is None:
        notifier = ChildDiedNotifier(bus.transport, [t for t in DEFAULT_TARGETS if t in names])
        tree.on_child_died(notifier.notify)
    else:  # main's lanes hears of a dead remote loop worker at once (else: by its missed heartbeats)
        remote_bus = Bus(role.qualified(ENDPOINT), inc, home).start()  # a client only: never publishes
        notifier = ChildDiedNotifier(remote_bus.transport, ["lanes"] if "loop" in role.children else [])
        tree.on_child_died(lambda name, i, why: notifier.notify(role.qualified(name), i, why))
        log.info("worker host %s: children %s, main at %s", role.host, ",".join(names), role.connect)
    try:
        service = SupervisorService(tree, ENDPOINT, inc, single_process=single_process, publish=bus.publish)
        bus.serve(ENDPOINT, service)
        if page is not None:
            page.start()
        log.info(
            "supervisor#%d pid %d: %d children%s",
            inc,
            os.getpid(),
            len(names),
            " (single process)" if single_process else "",
        )
        rc = tree.run()
        log.info("supervisor#%d exiting with %d", inc, rc)
        return rc
    finally:
        notifier.stop()
        if remote_bus is not None:
            remote_bus.stop()
        bus.stop()


def _tcp_refusal(home: GeodeHome, settings: TreeSettings, role: WorkerRole | None, single: bool) -> str:
    """Why tcp cannot start (one line), or "": keys are needed by ``[bus] listen`` and by a worker host."""
    from actors.bus import host_keys

    if role is None and (not settings.bus.listen or single):
        if single and settings.bus.listen:
            ignored = "[bus] listen is ignored by --single-process (inproc only)"
            print(f"geode serve: warning: {ignored}", file=sys.stderr)
        return ""
    if single:
        return "--role worker runs separate processes: drop --single-process"
    if host_keys.load(home) is None and not (settings.bus.curve.public_key and settings.bus.curve.secret_key):
        what = "[bus] listen" if role is None else "--role worker"
        return f"{what} needs this host's CURVE key pair in {home.keys_dir}: run geode keys init"
    return ""


def _remove_stale_sockets(home: GeodeHome) -> None:
    """While we hold the lock no one else owns sockets in the run dir; files there are leftovers."""
    try:
        for p in home.run_dir.glob("*.sock"):
            p.unlink(missing_ok=True)
    except OSError:
        pass
