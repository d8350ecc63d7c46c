"""The client following a turn whose done event was lost (lanes restarted: its stream buffer is gone): the
quiet-stream catch-up asks control to replay, the replay says it does not reach back and carries the turn's
durable outcome, and the client answers with it within a second or so. Before, a catch-up ignored the
outcomes and the client waited until its own deadline although the turn had long ended."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

from actors.cli.client import ControlClient
from geode.home import GeodeHome
from geode.protocol import control as c
from geode.protocol.envelope import Envelope
from geode.protocol.errors import GeodeError
from tests.cli.fake_control import FakeControl, welcome

OUTCOME = {"termination_reason": "natural", "text": "done while lanes restarted"}
PROMPTED = {"turn_id": "t-1", "session_id": "s-1", "position": 0}


def test_a_turn_that_ended_while_lanes_restarted_is_answered_from_its_durable_outcome(tmp_path: Path) -> None:
    """The control socket never streams the turn's events (they died with the previous lanes); attach
    replays nothing and names the turn's durable outcome."""
    home = GeodeHome(tmp_path / "gh").ensure()
    attached = c.Attached(
        session_id="s-1",
        replayed=0,
        complete=False,
        outcomes=[{"turn_id": "t-1", "state": "done", "outcome": OUTCOME}],
    ).model_dump()
    with FakeControl(home, answers={c.PROMPT: PROMPTED, c.ATTACH: attached}):
        cl = ControlClient(home, client_version="test")
        try:
            cl.connect(timeout_s=5.0, is_tty=False, mode="IPC")
            accepted = cl.request(c.PROMPT, {"text": "hi", "session_id": "s-1"})
            t0 = time.monotonic()
            result = cl.follow(accepted["turn_id"], timeout_s=10.0)
            took = time.monotonic() - t0
        finally:
            cl.close()
    assert result["termination_reason"] == "natural" and result["turn_id"] == "t-1", result
    assert took < 1.6, f"answered after {took:.2f}s"  # one quiet-stream catch-up (1 s), not a deadline


class _RestartedControl:
    """After the prompt, this control 'restarted': it answers each ping late (only when the next one arrives)
    with ok: false, refuses attach until a new handshake, then replays the turn's done event."""

    def __init__(self) -> None:
        self.handshakes = 0
        self.held: Envelope | None = None
        self.fc: FakeControl | None = None

    def __call__(self, env: Envelope, ident: bytes) -> dict[str, Any] | None:
        assert self.fc is not None
        if env.type == c.PING:
            if self.held is not None:  # the previous ping's answer, late: the client sent another meanwhile
                self.fc.send(ident, self.held.reply_ok({"ok": self.handshakes > 1}))
            self.held = env
            return None
        if env.type == c.HANDSHAKE:
            self.handshakes += 1
            return welcome()
        if env.type == c.PROMPT:
            return PROMPTED
        if env.type == c.ATTACH and self.handshakes < 2:
            self.fc.send(ident, env.reply_error("not_ready", "send cli.handshake first"))
            return None
        if env.type == c.ATTACH:
            done = {"session_id": "s-1", "turn_id": "t-1", "seq": 7, "kind": "turn_done"}
            self.fc.send(
                ident, Envelope(kind="cast", type=c.CLI_EVENT, body={**done, "data": {"result": OUTCOME}})
            )
            return c.Attached(session_id="s-1", replayed=1, complete=True).model_dump()
        return {}


def test_a_control_restart_answered_late_still_makes_the_client_reattach(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "gh").ensure()
    restarted = _RestartedControl()
    with FakeControl(home, answer=restarted) as fc:
        restarted.fc = fc
        cl = ControlClient(home, client_version="test")
        try:
            cl.connect(timeout_s=5.0, is_tty=False, mode="IPC")
            accepted = cl.request(c.PROMPT, {"text": "hi", "session_id": "s-1"})
            t0 = time.monotonic()
            result = cl.follow(
                accepted["turn_id"], timeout_s=8.0
            )  # before: RequestTimeout (never re-attached)
            took = time.monotonic() - t0
        finally:
            cl.close()
    assert result["termination_reason"] == "natural" and cl.reattached >= 1, result
    assert took < 2.5, f"answered after {took:.2f}s"


def test_a_quiet_stream_is_probed_every_half_second(tmp_path: Path) -> None:
    """A lost event is looked for 0.5 s after the stream went quiet (a kill: the turn goes on elsewhere, its
    events died with lanes or control), and again every 0.5 s while it stays quiet (was every 1 s)."""
    home = GeodeHome(tmp_path / "gh").ensure()
    empty = c.Attached(session_id="s-1", replayed=0, complete=True).model_dump()
    probes: list[float] = []

    def answer(env: Envelope, ident: bytes) -> dict[str, Any]:
        if env.type == c.HANDSHAKE:
            return welcome()
        if env.type == c.ATTACH:
            probes.append(time.monotonic())
            return empty
        return PROMPTED if env.type == c.PROMPT else {"ok": True}

    with FakeControl(home, answer=answer):
        cl = ControlClient(home, client_version="test")
        try:
            cl.connect(timeout_s=5.0, is_tty=False, mode="IPC")
            cl.request(c.PROMPT, {"text": "hi", "session_id": "s-1"})
            probes.clear()
            t0 = time.monotonic()
            try:
                cl.follow("t-1", timeout_s=4.2)
            except GeodeError:  # the turn never ends here: the follow times out
                pass
        finally:
            cl.close()
    at = [round(p - t0, 2) for p in probes]
    assert at and at[0] < 0.9, at  # the first probe after half a second of quiet
    gaps = [b - a for a, b in itertools.pairwise(at)]
    assert len(at) >= 6 and all(0.4 < g < 0.9 for g in gaps), at  # then every half second
