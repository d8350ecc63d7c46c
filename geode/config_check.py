"""Validate ``config.toml`` before anything starts: TOML syntax, known sections, value types."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from geode.config_file import read_config
from geode.config_schema import DOMAIN_SCHEMAS, LOADER_TABLES, OPEN_SECTIONS, Schema, loc_path
from geode.protocol.errors import ConfigError, GeodeError

TOP_LEVEL_SCALARS = {"model": str}  # the only key allowed outside a table
Validator = Callable[[dict[str, Any]], object]  # raises GeodeError (ConfigError) on a bad config


@dataclass
class ConfigReport:
    """The outcome of one check: ``errors`` refuse a start, ``warnings`` (unknown keys) do not."""

    path: Path
    config: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    source: bytes = b""  # the file's bytes as checked (the running tree's last good copy when ok)

    @property
    def ok(self) -> bool:
        return not self.errors


def domain_validators() -> list[Validator]:
    """The loaders that already refuse bad hooks and MCP servers (their messages name the entry)."""
    from geode.hooks.config import load_hooks
    from geode.tools.mcp.config import load_mcp_servers

    return [lambda c: load_hooks(c), lambda c: load_mcp_servers(c)]


def merge_schemas(*tables: Mapping[str, Sequence[Schema]]) -> dict[str, list[Schema]]:
    out: dict[str, list[Schema]] = {}
    for table in tables:
        for name, schemas in table.items():
            out.setdefault(name, []).extend(schemas)
    return out


def check_file(
    path: Path,
    *,
    schemas: Mapping[str, Sequence[Schema]] = DOMAIN_SCHEMAS,
    validators: Iterable[Validator] | None = None,
) -> ConfigReport:
    """Read and check ``path``; an absent file is the empty (default) config."""
    report = ConfigReport(path)
    try:
        report.config, report.source = read_config(path)
    except ConfigError as exc:
        fix = "; fix the syntax (see config/geode.toml)" if "invalid TOML" in exc.message else ""
        report.errors.append(exc.message + fix)
        return report
    check_config(report, schemas=schemas, validators=validators)
    return report


def check_config(
    report: ConfigReport,
    *,
    schemas: Mapping[str, Sequence[Schema]] = DOMAIN_SCHEMAS,
    validators: Iterable[Validator] | None = None,
) -> ConfigReport:
    """Check ``report.config`` in place: unknown sections and bad values are errors, unknown keys warnings."""
    raw, where = report.config, report.path
    valid = sorted({*schemas, *TOP_LEVEL_SCALARS})
    for name, value in raw.items():
        if name in TOP_LEVEL_SCALARS:
            if not isinstance(value, TOP_LEVEL_SCALARS[name]):
                report.errors.append(f'{where}: {name}: must be a string (e.g. {name} = "claude-opus-5-5")')
            continue
        if name not in schemas:
            report.errors.append(f"{where}: unknown section [{name}]; valid sections: {', '.join(valid)}")
            continue
        if not isinstance(value, dict):
            report.errors.append(f"{where}: {name} must be a table ([{name}]), not {type(value).__name__}")
            continue
        _check_section(report, name, value, schemas[name])
    if report.errors:
        return report  # the loaders below assume well-typed sections
    for validate in domain_validators() if validators is None else validators:
        try:
            validate(raw)
        except GeodeError as exc:
            report.errors.append(f"{where}: {exc.message}")
        except (ValidationError, TypeError, ValueError) as exc:
            report.errors.append(f"{where}: {str(exc).splitlines()[0]}")
    return report


def _check_section(report: ConfigReport, name: str, value: dict[str, Any], schemas: Sequence[Schema]) -> None:
    known: set[str] = set()
    for schema in schemas:
        fields = known_fields(schema)
        known |= fields
        subset = {k: v for k, v in value.items() if k in fields and k not in LOADER_TABLES.get(name, ())}
        try:
            TypeAdapter(schema).validate_python(subset)
        except ValidationError as exc:
            for err in exc.errors():
                report.errors.append(_type_line(report.path, name, err, schema))
        _warn_nested(report, name, subset, schema)
    if schemas and name not in OPEN_SECTIONS:
        for key in sorted(set(value) - known):
            report.warnings.append(
                f"{report.path}: [{name}] {key}: unknown key, ignored; known: {', '.join(sorted(known))}"
            )


def known_fields(schema: Schema) -> set[str]:
    """The keys a schema reads (field aliases where set)."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return {f.alias or n for n, f in schema.model_fields.items()}
    return {f.name for f in dataclasses.fields(schema)}


def _warn_nested(report: ConfigReport, name: str, value: dict[str, Any], schema: Schema) -> None:
    """Unknown keys one level down, in sub-tables that are themselves settings (``[tools.bash]``)."""
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return
    for fname, f in schema.model_fields.items():
        sub, key = f.annotation, f.alias or fname
        nested = isinstance(sub, type) and (issubclass(sub, BaseModel) or dataclasses.is_dataclass(sub))
        if nested and isinstance(value.get(key), dict):
            extra = set(value[key]) - known_fields(sub)
            for k in sorted(extra):
                report.warnings.append(f"{report.path}: [{name}.{key}] {k}: unknown key, ignored")


def _type_line(path: Path, section: str, err: Mapping[str, Any], schema: Schema) -> str:
    loc = loc_path(err.get("loc", ()))
    got = err.get("input")
    default = _default_of(schema, str(err.get("loc", ("",))[0]))
    fix = f"; fix: give a valid value or remove the key (default {default})" if default is not None else ""
    return f"{path}: [{section}] {loc}: {err.get('msg')} (got {got!r}){fix}"


def _default_of(schema: Schema, key: str) -> str | None:
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        for n, f in schema.model_fields.items():
            if key in (n, f.alias):
                d = f.get_default(call_default_factory=True)
                return f"{key} = {_toml(d)}" if isinstance(d, (int, float, str, bool, list)) else None
        return None
    for f in dataclasses.fields(schema):
        if f.name == key and f.default is not dataclasses.MISSING:
            return f"{key} = {_toml(f.default)}"
    return None


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, (str, list)) else repr(value)
