"""web_fetch {url}: an HTTP(S) GET through httpx with size and time caps, HTML reduced to readable text."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlparse

import httpx

from geode.tools.handlers import ToolEnv, ToolFailure

MAX_BYTES = 2 * 1024 * 1024
MAX_CHARS = 50_000
TIMEOUT_S = 30.0
MAX_REDIRECTS = 5


class _Text(HTMLParser):
    _SKIP = {"script", "style", "noscript", "template", "svg", "head"}
    _BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "pre"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in self._SKIP:
            self._skip += 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self._SKIP and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> tuple[str, str]:
    p = _Text()
    p.feed(html)
    lines = (" ".join(line.split()) for line in "".join(p.parts).splitlines())
    return p.title.strip(), "\n".join(line for line in lines if line)


def web_fetch(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    url = args["url"]
    if urlparse(url).scheme not in ("http", "https"):
        raise ToolFailure("only http and https URLs can be fetched", "invalid_url")
    timeout = min(TIMEOUT_S, env.deadline_s * 0.8)  # fail cleanly before the executor gives up
    body = bytearray()
    try:
        with httpx.Client(timeout=timeout, follow_redirects=True, max_redirects=MAX_REDIRECTS) as client:
            with client.stream("GET", url, headers={"User-Agent": "geode-web-fetch/1"}) as resp:
                for chunk in resp.iter_bytes():
                    body += chunk
                    if len(body) > MAX_BYTES or env.cancel.is_set():
                        break
                status, ctype, final = resp.status_code, resp.headers.get("content-type", ""), str(resp.url)
                encoding = resp.encoding or "utf-8"
    except httpx.HTTPError as exc:
        raise ToolFailure(f"fetch failed: {type(exc).__name__}: {exc}"[:500], "fetch_failed") from None
    raw = bytes(body[:MAX_BYTES]).decode(encoding, "replace")
    title = ""
    text = raw
    if "html" in ctype or raw.lstrip()[:15].lower().startswith(("<!doctype html", "<html")):
        title, text = html_to_text(raw)
    return {
        "url": final,
        "status": status,
        "content_type": ctype,
        "title": title,
        "text": text[:MAX_CHARS],
        "truncated": len(body) > MAX_BYTES or len(text) > MAX_CHARS,
    }
