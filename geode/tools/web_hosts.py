"""web_fetch asks once per new host in a session: a host not listed in ``[tools.web_fetch] hosts`` needs an
approval the first time a session fetches from it (the answer is remembered for the session); where nobody
can approve (DAEMON without a chat to ask, HEADLESS, MCP, automation) it is denied, naming the config key.
The handler checks every hop again, so a redirect to a new host is never followed unasked."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from geode.tools.approvals import Verdict
from geode.tools.spec import ToolCall, ToolContext, ToolSpec

HANDLER = "builtin:web_fetch"
CONFIG_KEY = "[tools.web_fetch] hosts"
MAX_SESSIONS = 1024
MAX_HOSTS = 512  # per session


def _allow(services: Mapping[str, Any]) -> Any:
    from geode.tools.builtin.web_guard import WebAllow  # lazy: httpx

    return services.get("web_fetch") or WebAllow()


def url_host(url: Any) -> str | None:
    """The host a web_fetch URL names, parsed exactly as the fetch parses it; None when it is not a URL
    web_fetch would fetch (the handler then says why)."""
    from geode.tools.builtin.web_guard import check_url, host_of  # lazy: httpx
    from geode.tools.handlers import ToolFailure

    try:
        return host_of(check_url(str(url)))
    except (ToolFailure, UnicodeError):
        return None


class WebHosts:
    """The session's approved and refused hosts (in this executor process; a restart asks again)."""

    def __init__(self, services: Mapping[str, Any]) -> None:
        self._services = services
        self._mu = threading.Lock()
        self._seen: OrderedDict[str, dict[str, bool]] = OrderedDict()

    def new_host(self, ctx: ToolContext, spec: ToolSpec, call: ToolCall) -> str | None:
        """The host a web_fetch call needs an approval for (None: not web_fetch, listed, or answered)."""
        if spec.handler != HANDLER:
            return None
        host = url_host(call.input.get("url"))
        if host is None or _allow(self._services).without_asking(host):
            return None
        with self._mu:
            answered = self._seen.get(ctx.session_id, {}).get(host)
        return None if answered else host

    def earlier(self, ctx: ToolContext, host: str | None) -> Verdict | None:
        """A denial when the person already refused ``host`` in this session (asked once per host)."""
        with self._mu:
            refused = host is not None and self._seen.get(ctx.session_id, {}).get(host) is False
        if not refused:
            return None
        msg = f"web_fetch to {host} was denied earlier in this session. Do NOT retry without a user request."
        return Verdict(False, "n", msg)

    @staticmethod
    def note(host: str | None) -> str:
        """What the approval prompt adds: the host it is asked for and what approving it covers."""
        if host is None:
            return ""
        return f" (new host {host}: approving allows fetching from it for the rest of this session)"

    def settle(self, ctx: ToolContext, host: str | None, verdict: Verdict) -> Verdict:
        """Remember a person's answer for ``host``; a denial with nobody to ask names the config key."""
        if host is None:
            return verdict
        if verdict.granted or verdict.how == "n":
            self._remember(ctx.session_id, host, verdict.granted)
        if verdict.how in ("no_person", "no_channel"):
            msg = (
                f"web_fetch to a new host, {host}, needs approval and nobody can approve it in {ctx.mode} "
                f"mode; list the host in {CONFIG_KEY} (config.toml) to fetch from it without asking."
            )
            return Verdict(False, verdict.how, msg)
        return verdict

    def allows(self, ctx: ToolContext, host: str) -> bool:
        """For every hop of a fetch: listed, approved in this session, or the turn skips permissions."""
        if _allow(self._services).without_asking(host):
            return True
        if ctx.skip_permissions and ctx.mode in ("IPC", "REPL"):
            return True
        with self._mu:
            return self._seen.get(ctx.session_id, {}).get(host) is True

    def _remember(self, session_id: str, host: str, granted: bool) -> None:
        with self._mu:
            hosts = self._seen.setdefault(session_id, {})
            if host in hosts or len(hosts) < MAX_HOSTS:
                hosts[host] = granted
            self._seen.move_to_end(session_id)
            while len(self._seen) > MAX_SESSIONS:
                self._seen.popitem(last=False)
