"""The executor hop's timestamps for ``sessions_scale.py --phases`` (bench only; imported by sitecustomize).

One line per tool call and point, keyed ``<turn id>/<tool_use id>``, in the same files and clock as the other
phases (:mod:`sitecustomize`): the loop's ``ExecutorClient.execute`` (``xcall``, both ends), the executor's
bus thread decoding the ``tool.execute`` request (``xrecv``), handing it to the handler pool (``xqueue``),
the pool thread's ``Inbound._handle`` (``xhandle``: dispatch, the call, encoding and sending the reply) and
``ToolExecutor.execute`` inside it (``xrun``). :func:`hop_report` (called by ``turn_phases.report``) splits
the hop by them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

EXECUTE = "tool.execute"


def _key(body: Any) -> str:
    ctx, call = getattr(body, "ctx", None), getattr(body, "call", None)
    if ctx is None or call is None:
        return ""
    return f"{ctx.turn_id}/{call.id}"


def _timed_call(execute: Any, point: str, write: Callable[[str], None]) -> Any:
    """``execute(self, ctx, call)`` writing ``point``'s line (the call's key, both ends) as it returns."""

    def timed(self: Any, ctx: Any, call: Any) -> Any:
        t0 = time.monotonic()
        try:
            return execute(self, ctx, call)
        finally:
            write(f"{point} {ctx.turn_id}/{call.id} {t0:.6f} {time.monotonic():.6f}\n")

    return timed


def patch(mod: Any, write: Callable[[str], None]) -> None:
    """Wrap the functions of ``mod`` (one of :data:`TARGETS`) that mark the hop."""
    n = mod.__name__
    if n == "geode.tools.executor_client":
        mod.ExecutorClient.execute = _timed_call(mod.ExecutorClient.execute, "xcall", write)
    elif n == "geode.tools.executor":
        mod.ToolExecutor.execute = _timed_call(mod.ToolExecutor.execute, "xrun", write)
    elif n == "geode.protocol.typed_frames":
        decode = mod.decode_request

        def xrecv(frame: bytes, **k: Any) -> Any:
            env, body = decode(frame, **k)
            if env.type == EXECUTE and (key := _key(body)):
                t = time.monotonic()
                write(f"xrecv {key} {t:.6f} {t:.6f}\n")
            return env, body

        mod.decode_request = xrecv
    elif n == "actors.bus.handler_pool":
        submit = mod.HandlerPool.submit

        def xqueue(self: Any, job: Any) -> None:
            args = getattr(job, "args", ())
            if len(args) >= 3 and (key := _key(args[2])):
                t = time.monotonic()
                write(f"xqueue {key} {t:.6f} {t:.6f}\n")
            submit(self, job)

        mod.HandlerPool.submit = xqueue
    elif n == "actors.bus.inbound":
        handle = mod.Inbound._handle

        def xhandle(self: Any, service: Any, env: Any, body: Any, *a: Any) -> None:
            t0 = time.monotonic()
            try:
                handle(self, service, env, body, *a)
            finally:
                if env.type == EXECUTE and (key := _key(body)):
                    write(f"xhandle {key} {t0:.6f} {time.monotonic():.6f}\n")

        mod.Inbound._handle = xhandle


TARGETS = frozenset(
    {"geode.tools.executor_client", "geode.tools.executor", "geode.protocol.typed_frames"}
    | {"actors.bus.handler_pool", "actors.bus.inbound"}
)

Span = tuple[str, float, float]


def hop_report(
    ev: dict[str, list[Span]], lo: float, hi: float, pct: Callable[[list[float], float], float]
) -> None:
    """Print the executor hop split by its points, over the calls whose ``xcall`` began in [lo, hi)."""
    at = {n: {k: (a, b) for k, a, b in ev.get(n, [])} for n in ("xrecv", "xqueue", "xhandle", "xrun")}
    r: dict[str, list[float]] = {}
    for k, c0, c1 in ev.get("xcall", []):
        if not lo <= c0 < hi or any(k not in at[n] for n in at):
            continue
        rv, q, (h0, h1), (x0, x1) = at["xrecv"][k][0], at["xqueue"][k][0], at["xhandle"][k], at["xrun"][k]
        for name, v in (
            ("call (loop, both ways)", c1 - c0),
            ("  loop send → executor decoded", rv - c0),
            ("  decoded → pool submit", q - rv),
            ("  submit → pool thread", h0 - q),
            ("  pool thread → execute", x0 - h0),
            ("  execute (the tool)", x1 - x0),
            ("  execute → reply handed", h1 - x1),
            ("  reply handed → loop back", c1 - h1),
        ):
            r.setdefault(name, []).append(v)
    if not r:
        return
    print(f"  executor hop ({len(r['call (loop, both ways)'])} calls):")
    for name, xs in r.items():
        cells = " ".join(f"{pct(xs, q) * 1e3:7.1f}" for q in (0.5, 0.9, 0.99))
        print(f"  {name:32s} {cells} {sum(xs) / len(xs) * 1e3:7.1f}")
