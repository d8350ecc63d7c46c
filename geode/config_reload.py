"""What `geode reload` changes: the difference of two validated config snapshots (and their ``.env``), per
child area, as the lines the CLI prints and the areas each child applies (pure: no process is touched).

The one reload rule (docs/runtime.md): messengers (bindings, platforms, their tokens) restart the messengers
child; hooks and MCP servers are re-read by the executor (next tool call, next turn's catalogue); loop,
verify, provider and model settings reach the next turn of every loop worker; the scheduler re-applies its
jobs; the webhooks child its routes and their ``.env`` secrets. Everything else (listening
addresses, keys, the store, thread counts, the shell's sections) needs ``geode serve`` again and is said so.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from geode.config_schema import GeodeConfig
from geode.messengers.config import TOKEN_VARS
from geode.private_dir import write_private

if TYPE_CHECKING:
    from geode.home import GeodeHome

MESSENGERS = "messengers"  # the messengers child restarts itself
HOOKS = "hooks"  # the executor's hook runner (next tool call) and the loop workers' prompt hooks (next turn)
MCP = "mcp"  # the executor reloads its MCP hub; the loop workers ask for the new catalogue
LOOP = "loop"  # loop, verify, provider and model settings: the next turn
SCHEDULE = "schedule"  # the scheduler child re-applies [[schedule.jobs]] and grace_s (the ledger stays)
WEBHOOKS = "webhooks"  # the webhooks child re-applies [[webhooks.routes]] and re-reads their .env secrets
AREAS = (MESSENGERS, HOOKS, MCP, LOOP, SCHEDULE, WEBHOOKS)

# key paths (first one or two parts) that a running child applies, and their area; the rest needs serve
_LIVE: tuple[tuple[str, str], ...] = (
    ("messengers", MESSENGERS),
    ("hooks", HOOKS),
    ("mcp.servers", MCP),
    ("mcpServers", MCP),
    ("trust", MCP),  # trusted projects' .mcp.json servers
    ("loop.workers", ""),  # how many loop children: the supervisor's, at start
    ("loop.capacity", ""),
    ("loop", LOOP),
    ("verify", LOOP),
    ("providers", LOOP),
    ("model", LOOP),
    ("schedule.enabled", ""),  # whether the daemon starts a scheduler child: at start
    ("schedule", SCHEDULE),
    ("webhooks.listen", ""),  # the child's listening socket and whose X-Forwarded-For it believes: at start
    ("webhooks.trusted_proxies", ""),
    ("webhooks", WEBHOOKS),
)
_NOT_THE_DAEMONS = ("mcp.serve.",)  # read by `geode mcp` when it starts, never by the tree
_SHOWN = ("loop.", "verify.", "model", "providers.model")  # values safe to print; elsewhere only the key
ENV_GOOD = "env.good.json"  # under run/: a digest per .env key the tree runs on (never a value)


@dataclass(frozen=True)
class ConfigChange:
    """The difference of two snapshots: ``applied`` lines per area (what a reload does), ``needs_serve``
    (changed keys no running child can take), ``areas`` (which of :data:`AREAS` changed)."""

    areas: frozenset[str]
    applied: tuple[str, ...]
    needs_serve: tuple[str, ...]
    env_keys: tuple[str, ...] = ()  # the .env names that changed (never their values)

    @property
    def empty(self) -> bool:
        return not self.areas and not self.needs_serve

    def lines(self) -> list[str]:
        """What `geode reload` prints: one line per area, then what needs `geode serve` again."""
        if self.empty:
            return ["nothing changed"]
        out = list(self.applied)
        if self.needs_serve:
            out.append("needs `geode serve` again: " + ", ".join(self.needs_serve))
        return out


def diff_config(
    old: GeodeConfig,
    new: GeodeConfig,
    old_env: Mapping[str, str] | None = None,
    new_env: Mapping[str, str] | None = None,
) -> ConfigChange:
    """Compare two validated snapshots (``GeodeConfig`` or the shell's ``TreeSettings``) and ``.env``s."""
    before, after = _flat(_view(old)), _flat(_view(new))
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    by_area: dict[str, list[str]] = {a: [] for a in AREAS}
    needs: list[str] = []
    for key in changed:
        if key.startswith(_NOT_THE_DAEMONS):
            continue
        area = _area(key)
        (by_area[area] if area else needs).append(key)
    if "messengers.approval_timeout_s" in by_area[MESSENGERS]:  # also the executor's wait, read at its start
        needs.append("messengers.approval_timeout_s")
    env_keys = sorted(_env_changes(old_env or {}, new_env or {}))
    token_vars = {v for names in TOKEN_VARS.values() for v in names}
    tokens = [k for k in env_keys if k in token_vars]
    areas = {a for a, keys in by_area.items() if keys}
    if tokens:
        areas.add(MESSENGERS)
    hook_secrets = sorted(set(env_keys) & _route_secrets(old, new))
    if hook_secrets:  # a rotated webhook secret: the child re-reads .env (the value is never shown)
        areas.add(WEBHOOKS)
    applied: list[str] = []
    if MESSENGERS in areas:
        applied.append(f"messengers: restarted ({_messengers_note(old, new, by_area[MESSENGERS], tokens)})")
    executor = []
    if HOOKS in areas:
        executor.append(f"hooks reloaded ({_hooks_note(old, new)}; next tool call)")
    if MCP in areas:
        executor.append(f"MCP servers: {_mcp_note(old, new, by_area[MCP])} (next turn)")
    if executor:
        applied.append("executor: " + "; ".join(executor))
    if LOOP in areas:
        loop = [_value_note(k, before.get(k), after.get(k)) for k in by_area[LOOP]]
        applied.append("loop: " + ", ".join(loop) + " (next turn)")
    if SCHEDULE in areas:
        applied.append(f"scheduler: {', '.join(_sections(by_area[SCHEDULE]))} re-applied (the ledger stays)")
    if WEBHOOKS in areas:
        what = _sections(by_area[WEBHOOKS]) + [f"{k} changed" for k in hook_secrets]
        applied.append(f"webhooks: {', '.join(what)} re-applied (the intake table stays)")
    others = [k for k in env_keys if k not in token_vars and k not in hook_secrets]
    if others:  # provider keys and endpoints: every turn reads .env (the process environment cannot change)
        applied.append(".env: " + ", ".join(others) + " changed (next turn)")
    return ConfigChange(frozenset(areas), tuple(applied), tuple(_sections(needs)), tuple(env_keys))


def _view(cfg: GeodeConfig) -> dict[str, Any]:
    """The typed sections as plain data, tables by their names in the file (``mcpServers``)."""
    return cfg.model_dump(mode="json", by_alias=True)


def _flat(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value and not path.startswith(("mcp.servers.", "mcpServers.")):
            out.update(_flat(value, path))
        else:
            out[path] = value
    return out


def _area(key: str) -> str:
    for prefix, area in _LIVE:
        if key == prefix or key.startswith(prefix + "."):
            return area
    return ""


def _route_secrets(*configs: Any) -> set[str]:
    """The ``.env`` names the webhook routes of ``configs`` read (``TreeSettings`` or ``GeodeConfig``)."""
    return {
        n for cfg in configs for r in getattr(getattr(cfg, "webhooks", None), "routes", ()) for n in r.secrets
    }


def _env_changes(old: Mapping[str, str], new: Mapping[str, str]) -> set[str]:
    return {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}


def _sections(keys: list[str]) -> list[str]:
    """``[bus] listen``-style names of the changed keys no running child applies (values never shown)."""
    out: list[str] = []
    for key in keys:
        section, _, rest = key.partition(".")
        name = f"[{section}] {rest}" if rest else key
        if name not in out:
            out.append(name)
    return out


def _value_note(key: str, old: Any, new: Any) -> str:
    name = key.split(".", 1)[1] if key.startswith(("loop.", "verify.")) and key.count(".") == 1 else key
    if key.startswith(_SHOWN) and _short(old) and _short(new):
        quoted = isinstance(old, str) or isinstance(new, str)
        return f"{name} {old!r} → {new!r}" if quoted else f"{name} {old} → {new}"
    return f"{name} changed"


def _short(value: Any) -> bool:
    return (
        value is None or isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) < 60)
    )


def _messengers_note(old: GeodeConfig, new: GeodeConfig, keys: list[str], tokens: list[str]) -> str:
    notes: list[str] = []
    was = {(b.platform, b.channel_id) for b in old.messengers.bindings}
    now = {(b.platform, b.channel_id) for b in new.messengers.bindings}
    for pairs, what in ((now - was, "added"), (was - now, "removed")):
        for name in sorted({p for p, _ in pairs}):
            n = sum(1 for p, _ in pairs if p == name)
            notes.append(f"{name} binding{'s' if n > 1 else ''} {what}")
    for platform in TOKEN_VARS:
        on_before = getattr(old.messengers, platform).enabled
        on_after = getattr(new.messengers, platform).enabled
        if on_before != on_after:
            notes.append(f"{platform} {'enabled' if on_after else 'disabled'}")
    rest = [k for k in keys if not k.startswith("messengers.bindings") and not k.endswith(".enabled")]
    if rest or (not notes and any(k.startswith("messengers.bindings") for k in keys)):
        notes.append(", ".join(k.removeprefix("messengers.") for k in rest) or "bindings changed")
    notes.extend(f"{t} changed" for t in tokens)
    return "; ".join(notes)


def _hooks_note(old: GeodeConfig, new: GeodeConfig) -> str:
    before, after = _hook_counts(old), _hook_counts(new)
    parts = []
    for event in sorted(before.keys() | after.keys()):
        if before.get(event) != after.get(event):
            parts.append(f"{event} {before.get(event, 0)} → {after.get(event, 0)}")
    return ", ".join(parts) or "settings changed"


def _hook_counts(cfg: GeodeConfig) -> dict[str, int]:
    dumped = cfg.hooks.model_dump()
    return {k: len(v) for k, v in dumped.items() if isinstance(v, list) and k != "claude_settings"}


def _mcp_note(old: GeodeConfig, new: GeodeConfig, keys: list[str]) -> str:
    before, after = _mcp_servers(old), _mcp_servers(new)
    parts = [f"+{n}" for n in sorted(after.keys() - before.keys())]
    parts += [f"-{n}" for n in sorted(before.keys() - after.keys())]
    parts += [f"~{n}" for n in sorted(before.keys() & after.keys()) if before[n] != after[n]]
    if any(k.startswith("trust") for k in keys):
        parts.append("trusted projects changed")
    return " ".join(parts) or "changed"


def _mcp_servers(cfg: GeodeConfig) -> dict[str, Any]:
    view = _view(cfg)
    return {**view.get("mcpServers", {}), **view.get("mcp", {}).get("servers", {})}


def env_digests(env: Mapping[str, str]) -> dict[str, str]:
    """One short digest per ``.env`` value: enough to see which keys changed, never the secret itself."""
    return {k: hashlib.sha256(v.encode()).hexdigest()[:16] for k, v in env.items()}


def remember_env(home: GeodeHome) -> None:
    """Note the digests of the ``.env`` the tree now runs on (`geode serve` at start, `geode reload`)."""
    home.ensure_run_dir()
    data = json.dumps(env_digests(home.load_dotenv()), sort_keys=True).encode()
    write_private(home.run_dir / ENV_GOOD, data)


def remembered_env(home: GeodeHome) -> dict[str, str]:
    """The digests :func:`remember_env` last wrote (empty when none)."""
    try:
        got = json.loads((home.run_dir / ENV_GOOD).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in got.items()} if isinstance(got, dict) else {}
