"""``config.toml`` as one typed object: :class:`GeodeConfig` assembles the domain's sections from the leaves
(each area's ``settings.py``, which hold the models and their defaults; ``geode.messengers.config`` is the
messengers' leaf), and the error lines of a refused file. It imports no working module, only leaves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from geode.control.settings import ControlSection
from geode.hooks.settings import HooksSection
from geode.lanes.settings import LanesSection
from geode.log.settings import LogSection
from geode.loop.settings import LoopSection, VerifySettings
from geode.memory.settings import MemorySection
from geode.messengers.config import MessengersSection
from geode.metrics.settings import MetricsSection
from geode.protocol.errors import ConfigError
from geode.providers.settings import ProvidersSection
from geode.records.settings import StoreConfig
from geode.schedule.settings import ScheduleSection
from geode.telemetry.settings import TelemetrySection
from geode.tools.mcp.settings import McpJsonServer, McpSection, TrustSection
from geode.tools.settings import ComputerUseSection, ToolsSection
from geode.webhooks.settings import WebhooksSection

Schema = Any  # a pydantic model class or a stdlib dataclass


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
    "mcpServers": [],  # entries by name in the JSON shape (McpJsonServer), checked by load_mcp_servers
    "trust": [TrustSection],
    "memory": [MemorySection],
    "gateway": [ComputerUseSection],
    "daemon": [ComputerUseSection],
    "log": [LogSection],
    "messengers": [MessengersSection],
    "schedule": [ScheduleSection],
    "webhooks": [WebhooksSection],
    "metrics": [MetricsSection],
    "telemetry": [TelemetrySection],
}
OPEN_SECTIONS = frozenset({"hooks", "mcpServers"})  # sub-keys are names, not settings
# tables whose entries the loaders check (load_hooks, load_mcp_servers: their errors name the entry) before
# the typed fields read them
LOADER_TABLES = {
    "hooks": frozenset(HooksSection.model_fields) - {"claude_settings"},
    "mcp": frozenset({"servers"}),
}


class GeodeConfig(BaseModel):
    """``config.toml`` as typed sections, one attribute per section with the schema's defaults.

    Build it once per process with :meth:`from_raw` (after the start-up check) and hand the sections to the
    builders. Unknown top-level keys are not kept (the start-up check warns about them). The shell adds its
    own sections in
    ``actors/tree/config_sections.py``.
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True)
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
    mcp_servers: dict[str, McpJsonServer] = Field(default_factory=dict, alias="mcpServers")
    trust: TrustSection = TrustSection()
    memory: MemorySection = MemorySection()
    gateway: ComputerUseSection = ComputerUseSection()
    daemon: ComputerUseSection = ComputerUseSection()
    log: LogSection = LogSection()
    messengers: MessengersSection = MessengersSection()
    schedule: ScheduleSection = ScheduleSection()
    webhooks: WebhooksSection = WebhooksSection()
    metrics: MetricsSection = MetricsSection()
    telemetry: TelemetrySection = TelemetrySection()

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> Self:
        """Typed sections of a parsed file (unknown keys ignored); a bad value is a ``ConfigError``."""
        names = {f.alias or n for n, f in cls.model_fields.items()}
        data = {k: v for k, v in raw.items() if k in names}
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError("; ".join(_error_line(e) for e in exc.errors())) from None

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
    """``[section] key: message (got value)``, the shape ``geode serve``'s check prints; an entry of a
    loader's table as the loader names it (``mcpServers.x: needs command ...``), its values not shown."""
    section, *rest = list(err.get("loc", ())) or ["?"]
    if section in LOADER_TABLES or section in OPEN_SECTIONS:
        msg = str(err.get("msg", "")).removeprefix("Value error, ")
        return f"{loc_path([section, *rest])}: {msg}"
    where = f"[{section}] {loc_path(rest)}" if rest else f"[{section}]"
    return f"{where}: {err.get('msg')} (got {err.get('input')!r})"
