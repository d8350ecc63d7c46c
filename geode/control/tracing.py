"""Control's span of a prompt (the CLI's ``geode ask``/REPL, an MCP client's ``run_agent``): the root of the
turn's trace, around its submission to lanes (docs/observability.md, "Traces")."""

from __future__ import annotations

from geode.telemetry import spans


def prompt_span(mode: str, origin: str, turn_id: str, text: str) -> spans.Span:
    if not spans.enabled():
        return spans.NOOP
    attrs = {
        "geode.turn_id": turn_id,
        "geode.mode": mode,
        "geode.origin": origin or None,
        "geode.input": spans.content(text),
    }
    return spans.span("control.prompt", attrs, root=True, kind="server")
