"""web_fetch {url}: an HTTP(S) GET through httpx with size and time caps, HTML reduced to readable text;
every hop checked and connected by address (web_guard) and to a host the session approved (web_hosts)."""

from __future__ import annotations

import functools
import ssl
from html.parser import HTMLParser
from typing import Any

import httpx

from geode.tools.builtin.web_guard import Target, WebAllow, check_target
from geode.tools.handlers import ToolEnv, ToolFailure

MAX_BYTES = 2 * 1024 * 1024
MAX_CHARS = 50_000
TIMEOUT_S = 30.0
MAX_REDIRECTS = 5
USER_AGENT = "geode-web-fetch/1"


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


@functools.cache
def _tls() -> ssl.SSLContext:
    """The process's TLS context for fetches, built as httpx builds a client's own (certifi's CA bundle, no
    environment): loading the bundle per fetch cost ~35 ms of CPU and a few MiB each time (issue 34)."""
    return httpx.create_ssl_context(trust_env=False)


def _client(timeout: float) -> httpx.Client:
    """The HTTP client of one fetch: no redirects (each hop is checked here), no proxy from the environment
    (the connection must go to the checked address); the process's one TLS context."""
    return httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False, verify=_tls())


def _send(client: httpx.Client, target: Target) -> httpx.Response:
    """GET ``target`` from one of its checked addresses (the next on a refused connection), never resolving
    the host again: the IP goes in the URL, the original host in the Host header and as TLS SNI/cert name."""
    host_header = target.url.netloc.decode("ascii")
    failure: httpx.ConnectError | None = None
    for ip in target.addresses:
        pinned = target.url.copy_with(host=str(ip))
        headers = {"Host": host_header, "User-Agent": USER_AGENT}
        req = client.build_request("GET", pinned, headers=headers, extensions={"sni_hostname": target.host})
        try:
            return client.send(req, stream=True)
        except httpx.ConnectError as exc:
            failure = exc
    assert failure is not None
    raise failure


def new_host(target: Target, hop: int) -> ToolFailure:
    """A hop to a host this session has not approved (a redirect: the executor asked for the first)."""
    return ToolFailure(
        f"web_fetch was redirected to a new host, {target.host}, that this session has not approved; "
        f"to fetch it, call web_fetch with this URL (approval is asked per host): {target.url}",
        "web_fetch_new_host",
        host=target.host,
        url=str(target.url),
        hop=hop,
    )


def web_fetch(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    allow = env.service("web_fetch") or WebAllow()
    hosts = env.service("web_hosts")  # geode.tools.web_hosts.WebHosts: who approved which host
    url: str | httpx.URL = args["url"]
    timeout = min(TIMEOUT_S, env.deadline_s * 0.8)  # fail cleanly before the executor gives up
    body = bytearray()
    try:
        with _client(timeout) as client:
            for _hop in range(MAX_REDIRECTS + 1):
                if env.cancel.is_set():
                    raise ToolFailure("fetch failed: cancelled at its deadline", "fetch_failed")
                target = check_target(url, allow)  # every hop: form, name, every resolved address
                if hosts is not None and not hosts.allows(env.ctx, target.host):
                    raise new_host(target, _hop)
                resp = _send(client, target)
                try:
                    if resp.has_redirect_location:
                        url = target.url.join(resp.headers["location"])
                        continue
                    for chunk in resp.iter_bytes():
                        body += chunk
                        if len(body) > MAX_BYTES or env.cancel.is_set():
                            break
                    status, ctype = resp.status_code, resp.headers.get("content-type", "")
                    encoding = resp.encoding or "utf-8"
                    final = str(target.url)
                    break
                finally:
                    resp.close()
            else:
                raise ToolFailure(f"fetch failed: more than {MAX_REDIRECTS} redirects", "fetch_failed")
    except httpx.HTTPError as exc:
        raise ToolFailure(f"fetch failed: {type(exc).__name__}: {exc}"[:500], "fetch_failed") from None
    except httpx.InvalidURL as exc:
        raise ToolFailure(f"invalid URL: {exc}"[:300], "invalid_url") from None
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
