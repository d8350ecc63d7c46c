"""`geode top [--once] [--json] [--interval S]`: a live terminal view of the tree's Prometheus page (turns,
latency, tool calls, uncertain receipts, restarts, lane queue, chat replies, webhooks, scheduler lag).

It reads ``GET /metrics`` at ``[metrics] listen`` (with the bearer token named by ``token_env``), the same
figures an operator's Prometheus scrapes; rates are the change between two reads. Exit 2 when metrics are
off, 3 when the page does not answer."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import typer

EXIT_OFF, EXIT_UNAVAILABLE = 2, 3


def top(
    once: bool = typer.Option(False, "--once", help="print one frame and exit"),
    as_json: bool = typer.Option(False, "--json", help="print the figures as JSON once"),
    interval: float = typer.Option(2.0, "--interval", min=0.2, help="seconds between reads"),
) -> None:
    """Live figures from the metrics page of `geode serve` (Ctrl-C quits)."""
    from geode.metrics.figures import figures

    url, token = _where()
    page = _read(url, token)
    if as_json:
        typer.echo(json.dumps(figures(page), indent=2, sort_keys=True))
        return
    from rich.console import Console

    console = Console()
    if once:
        console.print(_table(figures(page), url))
        return
    from rich.live import Live

    stop = threading.Event()
    before, then = page, time.monotonic()
    with Live(_table(figures(page), url), console=console, auto_refresh=False) as live:
        try:
            while not stop.wait(interval):
                now_page, now = _read(url, token), time.monotonic()
                live.update(_table(figures(now_page, before, now - then), url), refresh=True)
                before, then = now_page, now
        except KeyboardInterrupt:
            pass


def _where() -> tuple[str, str]:
    """The page's url and token from the config the tree serves on; exit 2 when metrics are off."""
    from geode.config_schema import GeodeConfig
    from geode.config_source import ConfigSource
    from geode.home import GeodeHome
    from geode.metrics.settings import parse_listen

    home = GeodeHome.from_env()
    source = ConfigSource(home, GeodeConfig.from_raw, tree=True)  # the tree's validated copy, else the file
    section = source.snapshot.metrics
    if not section.listen:
        typer.echo(
            'geode top: metrics are off: set [metrics] listen = "127.0.0.1:9464" and restart geode serve',
            err=True,
        )
        raise typer.Exit(EXIT_OFF)
    host, port = parse_listen(section.listen)
    host = "127.0.0.1" if host in ("0.0.0.0", "") else ("[::1]" if host == "::" else host)
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    token = source.env.get(section.token_env, "") if section.token_env else ""
    return f"http://{host}:{port}/metrics", token


def _read(url: str, token: str) -> dict[tuple[str, Any], float]:
    from prometheus_client.parser import text_string_to_metric_families

    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            text = r.read().decode()
    except (urllib.error.URLError, OSError) as exc:
        why = getattr(exc, "reason", None) or exc
        typer.echo(f"geode top: {url} did not answer ({why}); is `geode serve` running?", err=True)
        raise typer.Exit(EXIT_UNAVAILABLE) from None
    out: dict[tuple[str, Any], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return out


def _table(f: dict[str, Any], url: str) -> Any:
    from rich.table import Table

    t = Table(title=f"geode top — {url}", show_header=False, expand=False)
    t.add_column("figure", style="bold")
    t.add_column("value")
    turns, calls, lanes = f["turns"], f["model_calls"], f["lanes"]
    rate = turns["per_minute"]
    t.add_row("turns", f"{turns['total']:.0f}" + (f"  ({rate:.1f}/min)" if rate is not None else ""))
    t.add_row("  by termination", _kv(turns["by_termination"]))
    t.add_row("  by entry", _kv(turns["by_entry"]))
    t.add_row("  latency p50 / p95", f"{_s(turns['latency_p50_s'])} / {_s(turns['latency_p95_s'])}")
    t.add_row(
        "model calls",
        f"{calls['total']:.0f}  (errors {calls['errors']:.0f}, retries {calls['retries']:.0f}, "
        f"fallbacks {calls['fallbacks']:.0f})",
    )
    t.add_row("  latency p50 / p95", f"{_s(calls['latency_p50_s'])} / {_s(calls['latency_p95_s'])}")
    t.add_row("tool calls", f"{f['tool_calls']['total']:.0f}  {_kv(f['tool_calls']['by_outcome'])}")
    t.add_row("receipts uncertain", f"{f['receipts_uncertain']:.0f}")
    t.add_row(
        "lane queue depth",
        f"{lanes['queue_depth']:.0f}  (admission wait p95 {_s(lanes['admission_wait_p95_s'])})",
    )
    t.add_row("child restarts", _kv(f["children"]["restarts"]) or "0")
    t.add_row("incarnations", _kv(f["children"]["incarnations"]))
    t.add_row("chat replies", _kv(f["messengers"]["replies_by_outcome"]) or "0")
    t.add_row("webhook intakes", _kv(f["webhooks"]["intakes_by_outcome"]) or "0")
    t.add_row("scheduler lag p95", _s(f["scheduler"]["lag_p95_s"]))
    return t


def _kv(d: dict[str, float]) -> str:
    return "  ".join(f"{k} {v:.0f}" for k, v in sorted(d.items()))


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def register(app: typer.Typer) -> None:
    app.command("top")(top)
