"""JSON Schema validation of tool input against the plan's schema (Draft 2020-12, validators cached)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from geode.tools.schema_fast import Quick, compile_quick


class SchemaDenial(ValueError):
    """The input does not match the tool's schema (or the schema itself is broken)."""


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> Draft202012Validator:
    schema = json.loads(schema_json)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


# the validator of a schema object the plan holds, by identity (the plan's specs live as long as the plan):
# no canonical JSON of the schema per call; the object is kept with it, so its id cannot be reused meanwhile;
# with it the schema's quick predicate (geode/tools/schema_fast.py), None outside its subset
_BY_OBJECT: dict[int, tuple[dict[str, Any], Draft202012Validator, Quick | None]] = {}


def _validator_of(schema: dict[str, Any]) -> tuple[Draft202012Validator, Quick | None]:
    known = _BY_OBJECT.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1], known[2]
    validator = _validator(json.dumps(schema, sort_keys=True))  # checks the schema itself first
    quick = compile_quick(schema)
    if len(_BY_OBJECT) >= 512:
        _BY_OBJECT.clear()
    _BY_OBJECT[id(schema)] = (schema, validator, quick)
    return validator, quick


def validate_input(schema: dict[str, Any], args: dict[str, Any]) -> None:
    """Raise SchemaDenial naming the first error by path. Input the schema's quick predicate accepts is
    valid without the full validator (which decides, and words the error, for everything else)."""
    try:
        validator, quick = _validator_of(schema)
    except SchemaError as exc:
        raise SchemaDenial(f"the tool's input schema is invalid: {exc.message}") from None
    if quick is not None and quick(args):
        return
    errors = sorted(validator.iter_errors(args), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "<root>"
        raise SchemaDenial(f"invalid input at {where}: {first.message}"[:500])
