"""The safety policy of one MCP tool, in order: the config's explicit ``tools.<t>`` policy; read-only (listed
in ``read_only_tools`` or annotated ``readOnlyHint`` by the server); a mutation locked on the server's
declared ``resource_keys`` (receipted like any mutating tool); otherwise undeclared: never offered, never run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from geode.tools.spec import EffectClass, SafetyPolicy

KEYS_PREFIX = "keys:"  # resource strategy "keys:<k1>,<k2>": locks on the declared keys (geode.tools.locks)
UNDECLARED = SafetyPolicy(denied=True)  # listed in the catalogue (visible in status), never offered or called
READ_ONLY = SafetyPolicy()


@dataclass(frozen=True)
class ToolPolicy:
    policy: SafetyPolicy
    source: str  # config | read_only_tools | read_only_hint | resource_keys | undeclared

    @property
    def offered(self) -> bool:
        return not self.policy.denied


def keys_strategy(keys: Sequence[str]) -> str:
    return KEYS_PREFIX + ",".join(sorted(set(keys)))


def read_only_hint(tool: Any) -> bool:
    ann = getattr(tool, "annotations", None)
    return bool(getattr(ann, "read_only_hint", False)) if ann is not None else False


def tool_policy(cfg: Any, tool: Any) -> ToolPolicy:
    """The policy of ``tool`` (an SDK ``Tool``) served by the server ``cfg`` (an McpServerConfig)."""
    name = tool.name
    explicit = (getattr(cfg, "tools", None) or {}).get(name)
    if explicit is not None:
        return ToolPolicy(explicit, "config")
    if name in (getattr(cfg, "read_only_tools", None) or ()):
        return ToolPolicy(READ_ONLY, "read_only_tools")
    if read_only_hint(tool):
        return ToolPolicy(READ_ONLY, "read_only_hint")
    keys = list(getattr(cfg, "resource_keys", None) or ())
    if keys:
        return ToolPolicy(
            SafetyPolicy(effect=EffectClass.MUTATE, resource_strategy=keys_strategy(keys)), "resource_keys"
        )
    return ToolPolicy(UNDECLARED, "undeclared")


def undeclared_reason(server: str, tool: str) -> str:
    """Why an undeclared tool is refused, and how to declare it (named in the denial the model sees)."""
    return (
        f"MCP tool '{tool}' of server '{server}' has no declared resource policy, so GEODE does not run it. "
        f'To allow it, declare it read-only (read_only_tools = ["{tool}"] in [mcp.servers.{server}]), '
        f'or give the server resource_keys = ["..."] so its mutating tools run under those locks.'
    )
