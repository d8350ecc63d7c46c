"""Re-attaching to a session: its last exchanges, the answer of a turn that ended while away, the rest of a
turn still running, a prompt whose reply was lost (re-sent with its own turn id), and the picker behind a
bare ``--resume``."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from actors.cli import wire_data as c
from actors.cli import wire_data as lanes_msg
from actors.cli.wire import unwrap
from geode.protocol.errors import ErrorCode, GeodeError, RequestTimeout
from geode.visible_text import visible

if TYPE_CHECKING:  # the home (pathlib) and the transcript (logging, json): not per `ask`
    from geode.home import GeodeHome
    from geode.sessions.transcript import Exchange

LAST_EXCHANGES = 3
ANSWER_LINES = 12
PICK_MAX = 10
PROMPT_REPLY_S = 1.0  # one send of cli.prompt waits this long for its reply, then it is sent again
PROMPT_REPLY_MAX_S = 4.0  # each further wait doubles, up to this (a slow but live control is not flooded)
HANDSHAKE_WAIT_S = 2.0  # one re-handshake waits this long (a restarting control child comes back in ~0.2 s)
PROMPT_GIVE_UP_S = 30.0  # re-sent (same turn id) after a re-handshake until this long has passed
RETRYABLE = (ErrorCode.TIMEOUT, ErrorCode.UNAVAILABLE, ErrorCode.NOT_READY)


class TurnContinues(RequestTimeout):
    """The client stopped waiting, but its turn (whose id it chose) was or may have been accepted and goes on
    in the daemon. ``accepted``: the daemon acknowledged the prompt."""

    def __init__(self, turn_id: str, session_id: str, why: str, *, accepted: bool) -> None:
        super().__init__(why)
        self.turn_id, self.session_id, self.accepted = turn_id, session_id, accepted

    def explain(self) -> str:
        resume = f"`geode --resume {self.session_id}`"
        if self.accepted:
            return (
                f"turn {self.turn_id} of session {self.session_id} continues in the daemon "
                f"({self.message}); {resume} follows it"
            )
        return (
            f"no reply to the prompt ({self.message}); turn {self.turn_id} of session {self.session_id} may "
            f"be running in the daemon: {resume} shows it"
        )


def new_turn_id() -> str:
    """A turn id chosen by the client (the pattern ``cli.prompt`` accepts)."""
    return f"t-{os.urandom(8).hex()}"  # 64 random bits, as uuid4().hex[:16] had; no uuid (platform) import


def submit_prompt(
    cl: Any, body: dict[str, Any], backlog: list[dict[str, Any]], *, give_up_s: float = PROMPT_GIVE_UP_S
) -> dict[str, Any]:
    """Send ``cli.prompt`` (``body`` carries the client's ``turn_id``) until it is acknowledged.

    An unanswered send is sent again after ``PROMPT_REPLY_S`` (then after twice as long, up to
    ``PROMPT_REPLY_MAX_S``), and at once when the control child went away (``cl.disconnects``) or a new
    one does not know the connection (``not_ready``): then after a handshake on the same session. lanes'
    submit is idempotent by turn id, so every send is the same turn, and the reply to any of them answers.
    Past ``give_up_s``: :class:`TurnContinues` (not acknowledged)."""
    deadline = time.monotonic() + give_up_s
    sent: list[str] = []  # the correlation ids of every send of this prompt
    why, wait, resend_at = "", PROMPT_REPLY_S, 0.0
    fresh = True  # the connection needs no new handshake before the next send
    drops = cl.drain_drops()
    while True:
        now = time.monotonic()
        if now >= deadline:
            sid = str(body.get("session_id") or cl.session_id or "")
            raise TurnContinues(body["turn_id"], sid, f"gave up after {give_up_s:g}s: {why}", accepted=False)
        if cl.disconnects != drops:  # the control child went away: a lost reply, and a new control
            drops, fresh, resend_at = cl.disconnects, False, now
            why = why or "the control child went away"
        if not fresh:  # handshake on the same session; a late reply to an earlier send still answers
            hs = cl.send_request(c.HANDSHAKE, {**cl.handshake_body, "session_id": cl.session_id})
            env = cl.wait_reply([hs, *sent], min(HANDSHAKE_WAIT_S, deadline - now), on_event=backlog.append)
            if env is None or env.corr == hs:
                if env is not None and env.kind == "ok":
                    fresh = True
                    cl.reattached += 1
                else:  # no answer yet (control still restarting) or refused: try again, never a busy loop
                    time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
                continue
        else:
            if not sent or now >= resend_at:
                sent.append(cl.send_request(c.PROMPT, body))
                resend_at, wait = now + wait, min(2 * wait, PROMPT_REPLY_MAX_S)
            env = cl.wait_reply(sent, min(resend_at, deadline) - now, on_event=backlog.append)
            if env is None:
                why = why or f"no reply within {PROMPT_REPLY_S:g}s"
                continue
        try:
            return dict(unwrap(env))
        except GeodeError as exc:
            if exc.code not in RETRYABLE:
                raise
            why = str(exc)
            if env.corr != sent[-1]:
                continue  # an earlier send's refusal: the latest may still be accepted
            fresh = fresh and exc.code != ErrorCode.NOT_READY  # a new control: handshake first
            resend_at = time.monotonic() + 0.1  # again soon, never a busy loop on quick refusals


def _clip(text: str, lines: int, width: int = 200) -> list[str]:
    rows = [visible(r, one_line=True)[:width] for r in text.strip().splitlines()] or [""]  # escaped
    if len(rows) > lines:
        rows = [*rows[:lines], f"… ({len(rows) - lines} more lines)"]
    return rows


def exchange_lines(ex: Exchange) -> list[str]:
    prompt = _clip(ex.prompt, 3)
    out = [f"> {prompt[0]}", *(f"  {r}" for r in prompt[1:])]
    if ex.tools:
        out.append(f"  ⎿ tools: {', '.join(dict.fromkeys(ex.tools))}")
    if ex.answer.strip():
        answer = _clip(ex.answer, ANSWER_LINES)
        out += [f"⏺ {answer[0]}", *(f"  {r}" for r in answer[1:])]
    else:
        out.append("⏺ (no answer yet)")
    return out


def print_history(home: GeodeHome, session_id: str, out: TextIO, n: int = LAST_EXCHANGES) -> list[Exchange]:
    from geode.sessions.transcript import last_exchanges

    shown = last_exchanges(home.root, session_id, n)
    if shown:
        out.write(f"── last {len(shown)} exchange(s) of {session_id} ──\n")
        for ex in shown:
            out.write("\n".join(exchange_lines(ex)) + "\n")
        out.write("──\n")
        out.flush()
    return shown


def _done_results(events: list[dict[str, Any]], outcomes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    done = [
        {**((e.get("data") or {}).get("result") or {}), "turn_id": e.get("turn_id")}
        for e in events
        if e.get("kind") == lanes_msg.TURN_DONE
    ]
    if not done:  # the buffer did not reach back (lanes restarted): the durable outcomes instead
        done = [{**o["outcome"], "turn_id": o.get("turn_id")} for o in outcomes if o.get("outcome")]
    return done


def _backlog_of(events: list[dict[str, Any]], turn_id: str) -> list[dict[str, Any]]:
    """A running turn's replayed events; an approval is kept only when nothing happened after it."""
    mine = [e for e in events if e.get("turn_id") == turn_id]
    asks = [i for i, e in enumerate(mine) if e.get("kind") == lanes_msg.APPROVAL_REQUEST]
    keep = asks[-1] if asks and all(e.get("kind") != "tool_end" for e in mine[asks[-1] :]) else None
    return [e for i, e in enumerate(mine) if e.get("kind") != lanes_msg.APPROVAL_REQUEST or i == keep]


def show_where_you_are(
    cl: Any,
    home: GeodeHome,
    *,
    out: TextIO | None = None,
    renderer: Callable[[dict[str, Any]], None] | None = None,
    on_approval: Callable[[dict[str, Any]], str] | None = None,
    on_interrupt: Callable[[], bool] | None = None,
) -> dict[str, Any] | None:
    """Print the last exchanges; the answer of a turn that finished while away; follow a running turn to its
    end (rendered by ``renderer``). Returns that turn's result, if one was followed."""
    out = out or sys.stdout
    sid = cl.session_id or ""
    shown = print_history(home, sid, out)
    got: list[dict[str, Any]] = []
    try:
        reply = cl.request(c.ATTACH, {"session_id": sid, "after_seq": 0}, timeout_s=5.0, on_event=got.append)
    except GeodeError as exc:
        out.write(f"· cannot replay the session's stream: {exc}\n")
        return None
    got, cl.inbox = [*cl.inbox, *got], []
    running = reply.get("running")
    done = _done_results(got, reply.get("outcomes") or [])
    answers = {" ".join(ex.answer.split()) for ex in shown}
    last = next((d for d in reversed(done) if d.get("turn_id") != running), None)
    if last is not None and str(last.get("text") or "").strip():
        if " ".join(str(last["text"]).split()) not in answers:
            reason = last.get("termination_reason", "")
            out.write(f"· finished while you were away ({reason}):\n")
            answer = _clip(str(last["text"]), ANSWER_LINES)
            out.write("\n".join([f"⏺ {answer[0]}", *(f"  {r}" for r in answer[1:])]) + "\n")
    elif last is not None and last.get("termination_reason") not in (None, "natural", "forced_text"):
        err = f" ({visible(str(last['error']), one_line=True)})" if last.get("error") else ""
        out.write(f"· the last turn ended: {last.get('termination_reason')}{err}\n")
    out.flush()
    if not running:
        return None
    out.write(f"· turn {running} is still running; following it (Ctrl-C cancels)\n")
    out.flush()
    return cl.follow(
        running,
        backlog=_backlog_of(got, running),
        on_event=renderer,
        on_approval=on_approval,
        on_interrupt=on_interrupt,
    )


def _age(ts: float | None, now: float) -> str:
    if not ts:
        return "?"
    s = max(0.0, now - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{int(s // size)}{unit} ago"
    return f"{int(s)}s ago"


def session_rows(
    home: GeodeHome, sessions: list[dict[str, Any]], limit: int = PICK_MAX
) -> list[dict[str, Any]]:
    """Most recently updated first, each with its first prompt (from the transcript) and its age."""
    from geode.sessions.transcript import first_prompt

    now = time.time()
    rows = sorted(sessions, key=lambda s: float(s.get("updated_at") or 0), reverse=True)[:limit]
    return [
        {
            "session_id": s["session_id"],
            "age": _age(s.get("updated_at"), now),
            "status": s.get("status", ""),
            "prompt": visible(" ".join(first_prompt(home.root, s["session_id"]).split()), one_line=True)[:70]
            or "(no prompt)",
        }
        for s in rows
    ]


def pick_session(
    home: GeodeHome, sessions: list[dict[str, Any]], *, tty: bool, stdin: TextIO | None = None, out: TextIO
) -> str | None:
    """List recent sessions; on a terminal ask which one. None: nothing picked (or not a terminal)."""
    rows = session_rows(home, sessions)
    if not rows:
        out.write("no sessions to resume\n")
        return None
    for i, r in enumerate(rows, 1):
        out.write(f"{i:>3}. {r['age']:>8}  {r['session_id']}  {r['prompt']}\n")
    if not tty:
        return None
    stdin = stdin or sys.stdin
    for _ in range(5):
        out.write(f"resume which session? [1-{len(rows)}, Enter for 1] > ")
        out.flush()
        line = stdin.readline()
        if not line:
            return None
        choice = line.strip() or "1"
        if choice.isdigit() and 1 <= int(choice) <= len(rows):
            return str(rows[int(choice) - 1]["session_id"])
        hit = [r for r in rows if str(r["session_id"]).startswith(choice)]
        if len(hit) == 1:
            return str(hit[0]["session_id"])
        out.write(f"  {choice[:40]!r} is not one of the sessions above\n")
    return None
