"""The typed config every process builds (:class:`TreeSettings`: the domain's sections and the shell's leaves,
``actors/tree/settings.py`` and ``actors/bus/settings.py``), and the one start-up check of ``serve`` and
``--repl``."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from actors.bus.settings import BusSection
from actors.tree.settings import LoopShellSection, LoopTreeSection, SupervisorChildren, SupervisorSection
from actors.tree.spec import TreeConfig
from geode.config_check import ConfigReport, check_file, domain_validators, merge_schemas
from geode.config_schema import DOMAIN_SCHEMAS, GeodeConfig
from geode.home import GeodeHome

EXIT_CONFIG = 78  # EX_CONFIG: what `geode serve` and `geode --repl` exit with on a refused config


class TreeSettings(GeodeConfig):
    """The typed config of a GEODE process: the domain's sections and the shell's."""

    loop: LoopShellSection = LoopShellSection()
    supervisor: SupervisorSection = SupervisorSection()
    bus: BusSection = BusSection()


SHELL_SCHEMAS: dict[str, list[Any]] = {
    "supervisor": [TreeConfig, SupervisorChildren],
    "bus": [BusSection],
    "loop": [LoopTreeSection],
}
SCHEMAS = merge_schemas(DOMAIN_SCHEMAS, SHELL_SCHEMAS)


def check_home_config(home: GeodeHome) -> ConfigReport:
    """Check ``$GEODE_HOME/config.toml`` with every schema and the loaders that refuse bad entries."""
    validators = [*domain_validators(), TreeConfig.from_config, TreeSettings.from_raw]
    return check_file(home.config_file, schemas=SCHEMAS, validators=validators)


def start_settings(
    home: GeodeHome, *, prog: str, err: TextIO | None = None
) -> tuple[TreeSettings | None, ConfigReport]:
    """The one start-up check of ``geode serve`` and ``geode --repl``: warnings and errors go to ``err``
    one line each (``<prog>: ...``); refused (None) when any error, else the typed sections to build from."""
    out = sys.stderr if err is None else err
    report = check_home_config(home)
    for line in report.warnings:
        print(f"{prog}: warning: {line}", file=out)
    if not report.ok:
        for line in report.errors:
            print(f"{prog}: {line}", file=out)
        print(f"{prog}: refusing to start; no child was started", file=out)
        return None, report
    return TreeSettings.from_raw(report.config), report
