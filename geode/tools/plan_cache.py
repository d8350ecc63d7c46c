"""The executor's bounded cache of bound plans, keyed by content hash (filled by ``tool.plan.bind``)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from geode.tools.plan import BoundToolPlan

MAX_PLANS = 256


class PlanCache:
    """LRU of plans; a call is only accepted against a plan whose hash *and* generation were bound.

    A lookup of the plan used last takes no lock (one dict read, atomic under the GIL): a session's tool
    rounds all look up the same plan, and its place in the LRU cannot change meanwhile."""

    def __init__(self, capacity: int = MAX_PLANS) -> None:
        self._plans: OrderedDict[tuple[str, int], BoundToolPlan] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()
        self._last: tuple[tuple[str, int], BoundToolPlan] | None = None  # the newest key in the LRU, its plan

    def bind(self, plan: BoundToolPlan) -> None:
        key = (plan.content_hash, plan.generation)
        with self._lock:
            self._plans[key] = plan
            self._plans.move_to_end(key)
            while len(self._plans) > self._capacity:
                self._plans.popitem(last=False)
            self._last = (key, plan)

    def get(self, plan_hash: str, generation: int) -> BoundToolPlan | None:
        key = (plan_hash, generation)
        last = self._last
        if last is not None and last[0] == key:
            return last[1]
        with self._lock:
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
                self._last = (key, plan)
            return plan

    def __len__(self) -> int:
        with self._lock:
            return len(self._plans)
