"""Read a served tree's /metrics page in the tests: fetch (with or without a bearer token), parse with
prometheus_client's own text parser, and pick samples by name and labels."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

TOKEN = "scrape-token-s3cret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fetch(url: str, token: str | None = TOKEN) -> tuple[int, str]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def fetch_post(url: str, body: bytes, headers: dict[str, str]) -> int:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the page by (name, sorted labels)."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return out


def total(page: dict[tuple[str, Any], float], name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(
        v for (n, ls), v in page.items() if n == name and all(dict(ls).get(k) == x for k, x in labels.items())
    )


def counters(page: dict[tuple[str, Any], float]) -> dict[tuple[str, Any], float]:
    """The monotonic samples (counters' _total, histograms' _count/_sum/_bucket)."""
    return {k: v for k, v in page.items() if k[0].endswith(("_total", "_count", "_sum", "_bucket"))}
