"""The domain's sections of ``config.toml`` as pydantic schemas, built from the settings models in use."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    create_model,
)

from geode.control.connection import QUEUE_MAX
from geode.control.core import HANDSHAKE_DEADLINE_S, IDLE_TIMEOUT_S
from geode.lanes.queue import DEFAULT_MAX_GLOBAL_CAP, DEFAULT_SESSION_QUEUE
from geode.lanes.state import MAX_REQUEUES
from geode.loop.settings import LoopSettings, VerifySettings
from geode.mcp_server.http_auth import McpServeSection
from geode.messengers.config import MessengersSection
from geode.protocol.errors import ConfigError
from geode.providers.catalogue import WireApi
from geode.providers.pricing import Price
from geode.providers.retry import RetryPolicy
from geode.providers.vendors import VENDOR_ALIASES, VENDORS
from geode.records.lmdb_env import StoreConfig
from geode.tools.builtin.bash import BashLimits

Schema = Any  # a pydantic model class or a stdlib dataclass

# [loop] keys that reach LoopSettings; the per-session ones (model, workspace, denied/allowed tools, mode,
# origin, verify, skip_permissions, creator, the session's plan hash/generation) are always overridden by the
# turn's own settings, so they are not configuration (skip_permissions is only the submitting connection's
# flag; creator only an MCP connection's handshake: no config value may make sessions continuable over MCP).
PER_TURN_LOOP_KEYS = frozenset(
    {
        *("model", "workspace", "denied_tools", "allowed_tools", "mode", "origin", "verify"),
        *("skip_permissions", "creator", "plan_hash", "plan_generation"),
    }
)
LoopSection = create_model(  # type: ignore[call-overload]
    "LoopSection",
    **{k: (f.annotation, f) for k, f in LoopSettings.model_fields.items() if k not in PER_TURN_LOOP_KEYS},
)


class LanesSection(BaseModel):
    """``[lanes]`` (read by ``actors/lanes.py``)."""

    # turns running at once across the tree; unset: the capacity the registered loop workers offer, up to
    # max_global_cap (the cap also bounds provider spend)
    global_cap: int | None = Field(default=None, ge=1)
    max_global_cap: int = Field(default=DEFAULT_MAX_GLOBAL_CAP, ge=1)
    session_queue_max: int = Field(default=DEFAULT_SESSION_QUEUE, ge=1)
    handlers: int = Field(default=32, ge=1)
    max_requeues: int = Field(default=MAX_REQUEUES, ge=0)  # worker losses a turn survives (then worker_lost)


class ControlSection(BaseModel):
    """``[control]`` (read by ``actors/control.py``)."""

    idle_timeout_s: float = Field(default=IDLE_TIMEOUT_S, gt=0)
    queue_max: int = Field(default=QUEUE_MAX, ge=1)
    handshake_deadline_s: float = Field(default=HANDSHAKE_DEADLINE_S, gt=0)


class BashSection(BaseModel):
    """``[tools.bash]``: rlimits of ``run_bash`` (``BashLimits``)."""

    cpu_s: int | None = Field(default=BashLimits.cpu_s, ge=1)
    fsize_bytes: int = Field(default=BashLimits.fsize_bytes, ge=1)
    pid_namespace: bool = BashLimits.pid_namespace  # false: no PID namespace per call (weaker; said so)


def _allow_entries(value: list[str]) -> list[str]:
    from geode.tools.builtin.web_guard import parse_allow_entry  # lazy: httpx, only when hosts are listed

    for entry in value:
        parse_allow_entry(entry)  # ValueError names the entry
    return value


def _host_entries(value: list[str]) -> list[str]:
    from geode.tools.builtin.web_guard import parse_host_entry  # lazy: httpx, only when hosts are listed

    for entry in value:
        parse_host_entry(entry)  # ValueError names the entry
    return value


class WebFetchSection(BaseModel):
    """``[tools.web_fetch]``: ``allow_hosts``, hosts and CIDRs web_fetch may reach although not public;
    ``hosts``, hosts it fetches without asking (any other host asks once per session, ``WebAllow``)."""

    allow_hosts: Annotated[list[str], AfterValidator(_allow_entries)] = Field(default_factory=list)
    hosts: Annotated[list[str], AfterValidator(_host_entries)] = Field(default_factory=list)


class DelegateSection(BaseModel):
    """``[tools.delegate]``: the cap on a delegate_task child turn's time budget (``DelegateLimits``)."""

    max_timeout_s: float = Field(default=600.0, gt=0, le=3600)


class SendMessageSection(BaseModel):
    """``[tools.send_message]``: at most this many send_message posts per turn (``SendRule``)."""

    max_per_turn: int = Field(default=10, ge=0, le=1000)


class ToolsSection(BaseModel):
    """``[tools]`` (read by ``actors/executor.py``)."""

    handlers: int = Field(default=32, ge=1)
    default_workspace: str = ""  # empty: $GEODE_HOME/workspace
    roots: list[str] = Field(default_factory=list)
    bash: BashSection = BashSection()
    web_fetch: WebFetchSection = WebFetchSection()
    delegate: DelegateSection = DelegateSection()
    send_message: SendMessageSection = SendMessageSection()


class VendorSection(BaseModel):
    """``[providers.<vendor>]``: endpoint overrides; the key itself only ever comes from the environment."""

    api_key_env: str | None = None
    base_url: str | None = None
    wire: WireApi | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    options: dict[str, Any] = Field(default_factory=dict)
    login: Literal["auto", "apikey", "subscription"] = "auto"  # [providers.openai]
    auth_file: str | None = None  # [providers.codex]
    refresh_url: str | None = None  # [providers.codex]


_VENDOR_FIELDS: dict[str, Any] = {
    name: (VendorSection | None, Field(default=None, alias=name))
    for name in sorted({*VENDORS, *VENDOR_ALIASES})
}
_ProvidersBase = create_model(  # type: ignore[call-overload]
    "_ProvidersBase",
    __config__=ConfigDict(populate_by_name=True),
    **{n.replace(".", "_"): spec for n, spec in _VENDOR_FIELDS.items()},
)


class ProvidersSection(_ProvidersBase):  # type: ignore[misc, valid-type]
    """``[providers]``: the model, shared timeout/retry/fallback/pricing, one table per vendor."""

    model: str | None = None
    timeout_s: float = Field(default=300.0, gt=0)
    retry: RetryPolicy = RetryPolicy()
    fallback: list[str] = Field(default_factory=list)
    pricing: dict[str, Price] = Field(default_factory=dict)


class ComputerUseSection(BaseModel):
    """``[gateway]`` / ``[daemon]``: only a literal ``true`` lets a DAEMON session use computer tools."""

    allow_computer_use: StrictBool = False


def _upper(value: object) -> object:
    return value.upper() if isinstance(value, str) else value


class LogSection(BaseModel):
    """``[log]`` (read by ``actors/tree/process_logging.py``; case-insensitive)."""

    level: Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], BeforeValidator(_upper)] = (
        "INFO"
    )


class HooksSection(BaseModel):
    """``[hooks]``: ``[[hooks.<Event>]]`` arrays (checked by ``load_hooks``) and ``claude_settings``."""

    model_config = ConfigDict(extra="allow")
    claude_settings: list[str] | str = Field(default_factory=list)


class McpSection(BaseModel):
    """``[mcp.servers.<name>]`` (checked by ``load_mcp_servers``): command/args/env/cwd or url/headers,
    resource_keys, read_only_tools, tools, enabled, timeout_s, startup_timeout_s."""

    servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    serve: McpServeSection = McpServeSection()  # ``[mcp.serve]``: `geode mcp` as a server (its HTTP token)


class TrustSection(BaseModel):
    """``[trust]``: directories whose ``.geode/config.toml`` and ``.mcp.json`` are read (``geode trust``)."""

    projects: list[str] = Field(default_factory=list)


class ModelKey(BaseModel):
    """The top-level ``model = "<id>"`` (below ``GEODE_MODEL`` and ``[providers] model``)."""

    model: str


DOMAIN_SCHEMAS: dict[str, list[Schema]] = {
    "store": [StoreConfig],
    "loop": [LoopSection],
    "verify": [VerifySettings],
    "lanes": [LanesSection],
    "control": [ControlSection],
    "tools": [ToolsSection],
    "providers": [ProvidersSection],
    "hooks": [HooksSection],
    "mcp": [McpSection],
    "mcpServers": [],  # free-form JSON shape, checked by load_mcp_servers
    "trust": [TrustSection],
    "gateway": [ComputerUseSection],
    "daemon": [ComputerUseSection],
    "log": [LogSection],
    "messengers": [MessengersSection],
}
OPEN_SECTIONS = frozenset({"hooks", "mcpServers"})  # sub-keys are names, not settings


class GeodeConfig(BaseModel):
    """``config.toml`` as typed sections, one attribute per section with the schema's defaults.

    Build it once per process with :meth:`from_raw` (after the start-up check) and hand the sections to the
    builders; ``raw`` is the file as read, only for the free-form tables (``[[hooks.<Event>]]``,
    ``mcpServers``). The shell adds its own sections in ``actors/tree/config_sections.py``.
    """

    model_config = ConfigDict(frozen=True)
    model: str | None = None  # the top-level ``model = "<id>"``
    store: StoreConfig = StoreConfig()
    loop: LoopSection = LoopSection()
    verify: VerifySettings = VerifySettings()
    lanes: LanesSection = LanesSection()
    control: ControlSection = ControlSection()
    tools: ToolsSection = ToolsSection()
    providers: ProvidersSection = ProvidersSection()
    hooks: HooksSection = HooksSection()
    mcp: McpSection = McpSection()
    trust: TrustSection = TrustSection()
    gateway: ComputerUseSection = ComputerUseSection()
    daemon: ComputerUseSection = ComputerUseSection()
    log: LogSection = LogSection()
    messengers: MessengersSection = MessengersSection()
    raw: dict[str, Any] = Field(default_factory=dict, repr=False)

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> Self:
        """Typed sections of a parsed file (unknown keys ignored); a bad value is a ``ConfigError``."""
        data = {k: v for k, v in raw.items() if k in cls.model_fields and k != "raw"}
        try:
            return cls.model_validate({**data, "raw": dict(raw)})
        except ValidationError as exc:
            raise ConfigError("; ".join(_error_line(e) for e in exc.errors())) from None

    @classmethod
    def from_home(cls, home: Any) -> Self:
        """``$GEODE_HOME/config.toml`` (a :class:`~geode.home.GeodeHome`), typed; a broken file (a bad value
        too) is the running tree's last good config, else a one-line ``ConfigError`` naming the file."""
        from geode.config_file import serving

        return serving(home, cls.from_raw)

    def computer_use_in_daemon(self) -> bool:
        """``[daemon]`` or ``[gateway]`` ``allow_computer_use = true`` (a literal ``true`` only)."""
        return self.daemon.allow_computer_use or self.gateway.allow_computer_use


def loc_path(loc: Sequence[Any]) -> str:
    """A pydantic error location as a key path: ``("bindings", 0, "platform")`` → ``bindings[0].platform``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _error_line(err: Mapping[str, Any]) -> str:
    """``[section] key: message (got value)``, the shape ``geode serve``'s check prints."""
    section, *rest = list(err.get("loc", ())) or ["?"]
    where = f"[{section}] {loc_path(rest)}" if rest else f"[{section}]"
    return f"{where}: {err.get('msg')} (got {err.get('input')!r})"
