"""``[tools]`` (and ``[gateway]`` / ``[daemon]`` computer use): the executor's sections and their defaults, a
leaf the tools import (bash limits, web_fetch host entries, delegate and send_message caps)."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field, StrictBool

Net = ipaddress.IPv4Network | ipaddress.IPv6Network
TOOLS_HANDLERS = 32  # concurrent tool calls in the executor
BASH_CPU_S: int | None = None  # RLIMIT_CPU of run_bash; None: the call's own timeout
BASH_FSIZE_BYTES = 50 * 1024 * 1024  # RLIMIT_FSIZE of run_bash
BASH_PID_NAMESPACE = True  # False: no PID namespace per call (weaker; said so)
DELEGATE_MAX_TIMEOUT_S = 600.0  # cap on a delegate_task child turn's time budget
SEND_MAX_PER_TURN = 10  # send_message posts one turn may make


def parse_allow_entry(entry: str) -> str | Net:
    """A hostname (lowercased, no trailing dot) or an IP network; ValueError for anything else."""
    text = entry.strip()
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        pass
    name = text.lower().rstrip(".")
    labels = name.split(".")
    ok = name and all(
        lb and len(lb) <= 63 and lb.replace("-", "").replace("_", "").isalnum() for lb in labels
    )
    if not ok or "/" in text:
        raise ValueError(f"not a hostname, IP address or CIDR: {entry!r}")
    return name


def parse_host_entry(entry: str) -> str:
    """A ``[tools.web_fetch] hosts`` entry: a hostname, ``*.`` and a domain (its subdomains), or an IP
    address; lowercased, no trailing dot. ValueError for anything else."""
    text = entry.strip().lower().rstrip(".")
    bare = text.removeprefix("*.")
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        ip = None
    if ip is not None and bare == text:
        return str(ip)
    if ip is None and "/" not in bare and isinstance(parse_allow_entry(bare), str):
        return text
    raise ValueError(f"not a hostname, *.domain or IP address: {entry!r}")


def _allow_entries(value: list[str]) -> list[str]:
    for entry in value:
        parse_allow_entry(entry)  # ValueError names the entry
    return value


def _host_entries(value: list[str]) -> list[str]:
    for entry in value:
        parse_host_entry(entry)  # ValueError names the entry
    return value


class BashSection(BaseModel):
    """``[tools.bash]``: rlimits of ``run_bash`` (``BashLimits``)."""

    cpu_s: int | None = Field(default=BASH_CPU_S, ge=1)
    fsize_bytes: int = Field(default=BASH_FSIZE_BYTES, ge=1)
    pid_namespace: bool = BASH_PID_NAMESPACE  # false: no PID namespace per call (weaker; said so)


class WebFetchSection(BaseModel):
    """``[tools.web_fetch]``: ``allow_hosts``, hosts and CIDRs web_fetch may reach although not public;
    ``hosts``, hosts it fetches without asking (any other host asks once per session, ``WebAllow``)."""

    allow_hosts: Annotated[list[str], AfterValidator(_allow_entries)] = Field(default_factory=list)
    hosts: Annotated[list[str], AfterValidator(_host_entries)] = Field(default_factory=list)


class DelegateSection(BaseModel):
    """``[tools.delegate]``: the cap on a delegate_task child turn's time budget (``DelegateLimits``)."""

    max_timeout_s: float = Field(default=DELEGATE_MAX_TIMEOUT_S, gt=0, le=3600)


class SendMessageSection(BaseModel):
    """``[tools.send_message]``: at most this many send_message posts per turn (``SendRule``)."""

    max_per_turn: int = Field(default=SEND_MAX_PER_TURN, ge=0, le=1000)


class ToolsSection(BaseModel):
    """``[tools]`` (read by ``actors/executor.py``)."""

    handlers: int = Field(default=TOOLS_HANDLERS, ge=1)
    default_workspace: str = ""  # empty: $GEODE_HOME/workspace
    roots: list[str] = Field(default_factory=list)
    bash: BashSection = BashSection()
    web_fetch: WebFetchSection = WebFetchSection()
    delegate: DelegateSection = DelegateSection()
    send_message: SendMessageSection = SendMessageSection()


class ComputerUseSection(BaseModel):
    """``[gateway]`` / ``[daemon]``: only a literal ``true`` lets a DAEMON session use computer tools."""

    allow_computer_use: StrictBool = False
