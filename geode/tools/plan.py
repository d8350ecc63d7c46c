"""BoundToolPlan: an immutable, hashed, generation-numbered snapshot of the tools one step may use.

A :class:`PlanRegistry` compiles tool specs into plans and keeps the lineage: identical content returns the
previous plan (same hash, same generation); changed content gets ``generation + 1``. Filtering and provider
projection return new snapshots; the executor refuses calls made against any plan other than the bound one.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from geode.providers.types import ToolSchema
from geode.tools.spec import EffectClass, ToolSpec

PLAN_WIRE_VERSION = 1

# Tools only some provider/source pairs may see (provider projection hides them elsewhere).
PROVIDER_ONLY_TOOLS: dict[str, frozenset[tuple[str, str]]] = {
    "computer_use": frozenset({("openai", "subscription"), ("openai-codex", "subscription")}),
}


class PlanError(ValueError):
    """A plan that cannot be compiled (duplicate names, effect without resource strategy, bad hash)."""


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_hash(specs: Iterable[ToolSpec]) -> str:
    """SHA-256 of the canonical JSON of every spec (schema, handler identity, policy, deadline), by name."""
    dumped = sorted((s.model_dump(mode="json") for s in specs), key=lambda d: d["name"])
    return hashlib.sha256(_canonical(dumped).encode()).hexdigest()


def _check(specs: tuple[ToolSpec, ...]) -> None:
    seen: set[str] = set()
    for s in specs:
        if s.name in seen:
            raise PlanError(f"tool {s.name!r} appears twice in the plan")
        seen.add(s.name)
        if s.policy.effect != EffectClass.READ and not s.policy.denied and not s.policy.resource_strategy:
            raise PlanError(f"tool {s.name!r} has effect {s.policy.effect.value} but no resource strategy")


class BoundToolPlan(BaseModel):
    """Frozen plan snapshot. ``lineage`` names the family it belongs to; ``base_hash`` the unfiltered plan."""

    model_config = ConfigDict(frozen=True)

    specs: tuple[ToolSpec, ...] = ()
    generation: int = Field(default=1, ge=1)
    content_hash: str
    lineage: str = "default"
    base_hash: str = ""

    @classmethod
    def build(
        cls, specs: Iterable[ToolSpec], *, generation: int = 1, lineage: str = "default"
    ) -> BoundToolPlan:
        ordered = tuple(sorted(specs, key=lambda s: s.name))
        _check(ordered)
        h = content_hash(ordered)
        return cls(specs=ordered, generation=generation, content_hash=h, lineage=lineage, base_hash=h)

    # --- lookups -------------------------------------------------------------------------------------
    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        return self.specs

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.specs)

    def get(self, name: str) -> ToolSpec | None:
        for s in self.specs:
            if s.name == name:
                return s
        return None

    def __contains__(self, name: object) -> bool:
        return any(s.name == name for s in self.specs)

    def __len__(self) -> int:
        return len(self.specs)

    def matches(self, plan_hash: str, generation: int) -> bool:
        """True when a call made against (hash, generation) was made against this very snapshot."""
        return plan_hash == self.content_hash and generation == self.generation

    # --- derived snapshots ---------------------------------------------------------------------------
    def _derive(self, specs: tuple[ToolSpec, ...]) -> BoundToolPlan:
        h = content_hash(specs)
        if h == self.content_hash:
            return self
        return BoundToolPlan(
            specs=specs,
            generation=self.generation + 1,
            content_hash=h,
            lineage=self.lineage,
            base_hash=self.base_hash or self.content_hash,
        )

    def filtered(self, *, allowed: Iterable[str] | None = None, denied: Iterable[str] = ()) -> BoundToolPlan:
        """Keep ``allowed`` (if given) minus ``denied`` and declared denials; new snapshot on change."""
        allow = None if allowed is None else set(allowed)
        deny = set(denied)
        kept = tuple(
            s
            for s in self.specs
            if (allow is None or s.name in allow) and s.name not in deny and not s.policy.denied
        )
        return self._derive(kept)

    def projected(self, provider: str, *, source: str = "", unavailable: Iterable[str] = ()) -> BoundToolPlan:
        """The snapshot a given provider/source may see (provider-only tools hidden elsewhere)."""
        gone = set(unavailable)
        kept = tuple(
            s
            for s in self.specs
            if s.name not in gone
            and (s.name not in PROVIDER_ONLY_TOOLS or (provider, source) in PROVIDER_ONLY_TOOLS[s.name])
        )
        return self._derive(kept)

    def tool_schemas(self) -> tuple[ToolSchema, ...]:
        """What the model sees: name, description and input schema of every tool in the plan."""
        return tuple(
            ToolSchema(name=s.name, description=s.description, input_schema=s.input_schema)
            for s in self.specs
        )

    def schemas_for(self, provider: str, *, source: str = "") -> tuple[ToolSchema, ...]:
        return self.projected(provider, source=source).tool_schemas()

    # --- wire ----------------------------------------------------------------------------------------
    def to_wire(self) -> dict[str, Any]:
        """Body of a ``tool.plan.bind`` message (re-hashed and checked by :meth:`from_wire`)."""
        return {
            "v": PLAN_WIRE_VERSION,
            "generation": self.generation,
            "content_hash": self.content_hash,
            "lineage": self.lineage,
            "base_hash": self.base_hash,
            "specs": [s.model_dump(mode="json") for s in self.specs],
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> BoundToolPlan:
        specs = tuple(ToolSpec.model_validate(s) for s in data.get("specs", ()))
        _check(specs)
        h = content_hash(specs)
        if h != data.get("content_hash"):
            raise PlanError("plan content hash does not match its specs")
        return cls(
            specs=tuple(sorted(specs, key=lambda s: s.name)),
            generation=int(data.get("generation", 1)),
            content_hash=h,
            lineage=str(data.get("lineage", "default")),
            base_hash=str(data.get("base_hash") or h),
        )


class PlanRegistry:
    """Compiles specs into plans and keeps each lineage's latest snapshot (thread-safe)."""

    def __init__(self) -> None:
        self._latest: dict[str, BoundToolPlan] = {}
        self._lock = threading.Lock()

    def compile(self, specs: Iterable[ToolSpec], *, lineage: str = "default") -> BoundToolPlan:
        """Same content as the lineage's latest → that plan; otherwise a new one with generation + 1."""
        fresh = BoundToolPlan.build(specs, lineage=lineage)
        with self._lock:
            prev = self._latest.get(lineage)
            if prev is not None and prev.content_hash == fresh.content_hash:
                return prev
            gen = 1 if prev is None else prev.generation + 1
            plan = fresh.model_copy(update={"generation": gen})
            self._latest[lineage] = plan
            return plan

    def latest(self, lineage: str = "default") -> BoundToolPlan | None:
        with self._lock:
            return self._latest.get(lineage)

    def adopt(self, plan: BoundToolPlan) -> BoundToolPlan:
        """Record a derived snapshot (filtered/projected) as the lineage's latest."""
        with self._lock:
            prev = self._latest.get(plan.lineage)
            if (
                prev is not None
                and prev.content_hash != plan.content_hash
                and plan.generation <= prev.generation
            ):
                plan = plan.model_copy(update={"generation": prev.generation + 1})
            self._latest[plan.lineage] = plan
            return plan


PlanCompiler = PlanRegistry
CATALOGUE_LINEAGE = "catalogue"


def compile_plan(
    catalogue: Iterable[ToolSpec],
    *,
    allowed: Iterable[str] | None = None,
    denied: Iterable[str] = (),
    registry: PlanRegistry | None = None,
    lineage: str = CATALOGUE_LINEAGE,
) -> BoundToolPlan:
    """The one plan builder: the executor's catalogue (built-ins + MCP overlay) compiled into a plan, then the
    session's allowlist (None = all) and denylist applied, declared denials dropped.

    The result's ``content_hash`` depends only on the specs kept, so control (composing the session) and the
    loop worker (running its turn) get the same hash from the same catalogue and lists. ``registry`` keeps
    the catalogue's generation lineage (a changed catalogue gets ``generation + 1``)."""
    specs = list(catalogue)
    if registry is None:
        base = BoundToolPlan.build(specs, lineage=lineage)
    else:
        base = registry.compile(specs, lineage=lineage)
    return base.filtered(allowed=allowed, denied=denied)
