"""A scripted loop worker speaking the turns protocol (in-process or as a real process over the bus).

The prompt text is the script: ``approve:<tool>[:<timeout_s>]`` asks lanes for approval (an effect is
recorded only when allowed; a turn whose settings skip permissions is approved without asking, as the
executor's ApprovalGate does); ``slow`` records an effect then waits for cancel; ``sleep:<s>`` sleeps;
``stream:<n>:<s>`` streams n deltas s apart; ``fail:<reason>`` ends with that termination reason.
Effects are appended to ``effects`` (and to ``$GEODE_TEST_EFFECTS`` when set, one line per effect).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from geode.protocol import lanes as lanes_msg
from geode.protocol import turns
from geode.protocol.transport import Request, Transport


class ScriptedWorker:
    def __init__(self, transport: Transport, name: str = "loop-1", incarnation: int = 1) -> None:
        self.t, self.name, self.incarnation = transport, name, incarnation
        self.seq = 0
        self._lock = threading.Lock()
        self.cancelled: set[str] = set()
        self.effects: list[str] = []
        self.runs: list[turns.TurnRun] = []
        self.running: set[str] = set()
        self.max_running = 0

    def ready(self) -> None:
        self.t.call(
            "lanes", turns.WORKER_READY, turns.WorkerReady(worker=self.name, incarnation=self.incarnation)
        )

    def heartbeat(self) -> None:
        with self._lock:
            running = sorted(self.running)
        hb = turns.WorkerHeartbeat(
            worker=self.name, incarnation=self.incarnation, running=running, free=max(0, 1 - len(running))
        )
        self.t.call("lanes", turns.WORKER_HEARTBEAT, hb, timeout_s=2.0)

    def handle(self, r: Request) -> Any:
        if r.type == turns.TURN_RUN:
            run: turns.TurnRun = r.body  # type: ignore[assignment]
            with self._lock:
                self.runs.append(run)
                self.running.add(run.turn_id)
                self.max_running = max(self.max_running, len(self.running))
            threading.Thread(target=self._run, args=(run,), daemon=True).start()
            return turns.TurnRunAccepted(worker=self.name)
        if r.type == turns.TURN_CANCEL:
            self.cancelled.add(r.body.turn_id)  # type: ignore[attr-defined]
        return turns.Ack()

    def _effect(self, what: str) -> None:
        self.effects.append(what)
        path = os.environ.get("GEODE_TEST_EFFECTS")
        if path:
            with open(path, "a") as f:
                f.write(f"{what}\n")

    def _event(self, run: turns.TurnRun, kind: str, **data: Any) -> None:
        with self._lock:
            self.seq += 1
            seq = self.seq
        ev = turns.TurnEvent(session_id=run.session_id, turn_id=run.turn_id, seq=seq, kind=kind, data=data)
        self.t.cast("lanes", turns.TURN_EVENT, ev)

    def _run(self, run: turns.TurnRun) -> None:
        text = run.input.text
        self._event(run, "round_start", round=1, resume=run.resume)
        self._effect(f"run {run.turn_id} {self.name} resume={run.resume}")
        reason, tool_calls = "natural", 0
        if text.startswith("approve:"):
            parts = text.split(":")
            tool, timeout = parts[1], float(parts[2]) if len(parts) > 2 else 10.0
            ask = lanes_msg.ApprovalAsk(
                approval_id=f"ap-{run.turn_id}-{run.attempt}",
                session_id=run.session_id,
                turn_id=run.turn_id,
                tool_name=tool,
                detail=f"{tool} detail",
                timeout_s=timeout,
            )
            self._event(run, "tool_start", id="tu1", name=tool, args_preview="{}")
            if run.settings.get("skip_permissions") and run.mode in ("IPC", "REPL"):  # as ApprovalGate does
                d = lanes_msg.ApprovalDecision(
                    approval_id=ask.approval_id, decision="y", reason="skip_permissions"
                )
            else:
                d = lanes_msg.ApprovalDecision.model_validate(
                    self.t.call("lanes", lanes_msg.APPROVAL, ask, timeout_s=timeout + 5)
                )
            if d.decision in ("y", "a"):
                self._effect(f"tool {tool} {run.turn_id}")
            tool_calls = 1
            self._event(
                run,
                "tool_end",
                id="tu1",
                name=tool,
                error=None if d.decision != "n" else f"denied ({d.reason})",
            )
        elif text.startswith("slow"):
            self._effect(f"first-effect {run.turn_id}")
            deadline = time.monotonic() + 20
            while run.turn_id not in self.cancelled and time.monotonic() < deadline:
                time.sleep(0.01)
            reason = "user_cancelled"
        elif text.startswith("sleep:"):
            time.sleep(float(text.split(":")[1]))
        elif text.startswith("stream:"):
            _, n, gap = text.split(":")
            for i in range(int(n)):
                self._event(run, "text_delta", text=f"[{i}]")
                time.sleep(float(gap))
        elif text.startswith("fail:"):
            reason = text.split(":")[1]
        self._event(run, "text_delta", text=f"answer to {text}")
        result = turns.TurnResult(
            text=f"answer to {text}", termination_reason=reason, tool_calls=tool_calls, rounds=1
        )
        done = turns.TurnDone(
            turn_id=run.turn_id,
            session_id=run.session_id,
            worker=self.name,
            incarnation=self.incarnation,
            result=result,
        )
        for _ in range(50):  # a done is retried until lanes acknowledges it (lanes may be restarting)
            try:
                self.t.call("lanes", turns.TURN_DONE, done, timeout_s=2.0)
                break
            except Exception:
                time.sleep(0.2)
        with self._lock:
            self.running.discard(run.turn_id)
