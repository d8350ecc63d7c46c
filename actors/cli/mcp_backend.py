"""The turn runner behind `geode mcp`: the user's daemon over the control socket, else an in-process tree.

A turn goes through the control socket like `geode ask` (the same :class:`ControlClient`, handshake in
HEADLESS mode, ``run_prompt``), so lanes, records and `geode sessions` see it. When no daemon serves this
``GEODE_HOME``, the first turn starts the single-process tree (as `geode --repl` does) and keeps it until
`geode mcp` exits.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from geode.home import GeodeHome
from geode.mcp_server.turns import MODE, HeadlessTurn, ProgressFn, SessionFn, progress_line
from geode.protocol import control as c
from geode.protocol.errors import GeodeError, NotFound
from geode.sessions.modes import HEADLESS_DENIED_TOOLS

log = logging.getLogger(__name__)

GRACE_S = 30.0  # waited past the turn's own time budget before the client gives up on it
TREE_START_S = 60.0


class ControlTurnRunner:
    """:class:`~geode.mcp_server.turns.TurnRunner` over the control socket (thread-safe)."""

    def __init__(self, home: GeodeHome, *, creator: str) -> None:
        self.home = home
        self.creator = creator  # recorded on the sessions it starts; it continues only those
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._tree: threading.Thread | None = None
        self._tree_error: str | None = None

    # --- backend ----------------------------------------------------------------------------------------
    def backend(self) -> str:
        """``daemon``, ``single-process`` (ours, in this process) or ``none`` (started by the next turn)."""
        from actors.cli.daemon_start import control_answers

        if self._tree is not None and self._tree.is_alive():
            return "single-process"
        return "daemon" if control_answers(self.home, 0.5) else "none"

    def _ensure_backend(self) -> str:
        with self._lock:
            how = self.backend()
            if how != "none":
                return how
            self._start_tree()
            return "single-process"

    def _start_tree(self) -> None:
        from actors.cli.repl import run_in_process_tree

        ready = threading.Event()
        self._tree_error = None

        def hold() -> None:
            ready.set()
            self._stop.wait()

        def run() -> None:
            try:
                run_in_process_tree(self.home, hold, timeout_s=TREE_START_S, holder="geode mcp")
            except GeodeError as exc:
                self._tree_error = exc.message or str(exc)
            except BaseException as exc:  # typer.Exit on a config `geode serve` would refuse
                self._tree_error = f"the in-process tree did not start: {self._config_refusal() or exc}"
            finally:
                ready.set()

        self._tree = threading.Thread(target=run, name="mcp-tree", daemon=True)
        self._tree.start()
        ready.wait(TREE_START_S + 5)
        if self._tree_error is not None or not self._tree.is_alive():
            raise GeodeError(self._tree_error or "the in-process tree did not start")

    def _config_refusal(self) -> str | None:
        """The first line `geode serve` would refuse this home's config with, if any."""
        from actors.tree.config_sections import check_home_config

        try:
            errors = check_home_config(self.home).errors
        except Exception as exc:
            return f"config check failed: {exc}"
        return f"the config is refused: {errors[0]}" if errors else None

    def close(self) -> None:
        self._stop.set()
        if self._tree is not None:
            self._tree.join(20)

    # --- turns ------------------------------------------------------------------------------------------
    def run(self, turn: HeadlessTurn, progress: ProgressFn, on_session: SessionFn) -> dict[str, Any]:
        from actors.cli.client import ControlClient
        from actors.cli.reattach import TurnContinues
        from actors.control import geode_version

        try:
            self._ensure_backend()
        except GeodeError as exc:
            return {"error": f"no GEODE backend: {exc.message or exc}", "session_id": turn.session_id}
        cl = ControlClient(self.home, client_version=geode_version())

        def on_event(ev: dict[str, Any]) -> None:
            line = progress_line(ev)
            if line is not None:
                progress(line)

        try:
            self._connect(cl, turn)
            on_session(str(cl.session_id))
            result = cl.run_prompt(
                turn.prompt,
                on_event=on_event,
                on_approval=lambda _data: "n: HEADLESS (MCP): nobody to approve",
                timeout_s=turn.time_budget_s + GRACE_S,
            )
        except NotFound as exc:
            return {"error": f"unknown session: {exc.message}", "session_id": turn.session_id}
        except TurnContinues as exc:
            return {"error": exc.explain(), "session_id": exc.session_id}
        except GeodeError as exc:
            return {"error": f"daemon unavailable: {exc.message or exc}", "session_id": cl.session_id}
        finally:
            cl.close()
        return {**result, "session_id": cl.session_id}

    def _connect(self, cl: Any, turn: HeadlessTurn) -> None:
        """Handshake in HEADLESS mode (the caller's workspace, model, budget, and who asks); a continued turn
        resumes (control refuses a session another creator, or no MCP client, started)."""
        cl.connect(
            mode=MODE,
            cwd=turn.workspace,
            model=turn.model,
            time_budget_s=turn.time_budget_s,
            is_tty=False,
            creator=self.creator,
        )
        if turn.session_id is not None:
            cl.session_id = cl.request(c.RESUME, {"session_id": turn.session_id})["session_id"]

    def cancel(self, session_id: str) -> None:
        """``cli.cancel`` of the session's running turn, on a connection of its own (the turn's connection
        is busy following the turn in another thread)."""
        from actors.cli.client import ControlClient

        cl = ControlClient(self.home)
        try:  # a handshake on the session (not cli.resume): a turn still queued has no checkpoint yet
            cl.connect(mode=MODE, is_tty=False, creator=self.creator, session_id=session_id)
            cl.cancel(None)
        except GeodeError as exc:
            log.warning("could not cancel the turn of session %s: %s", session_id, exc)
        finally:
            cl.close()

    def health(self) -> dict[str, Any]:
        from actors.control import geode_version

        backend = self.backend()
        out: dict[str, Any] = {
            "ok": backend != "none" or self._tree_error is None,
            "version": geode_version(),
            "geode_home": str(self.home.root),
            "backend": backend,
            "mode": MODE,
            "denied_tools": sorted(HEADLESS_DENIED_TOOLS),
        }
        if backend == "daemon":
            out["children"] = self._children()
        if self._tree_error is not None:
            out["error"] = self._tree_error
        return out

    def _children(self) -> dict[str, str]:
        from actors.tree.client import tree_status

        try:
            st = tree_status(self.home, timeout_s=2.0)
        except GeodeError:
            return {}
        return {} if st is None else {ch.name: ch.state for ch in st.children}
