"""The executor's bounded cache of bound plans, keyed by content hash (filled by ``tool.plan.bind``)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from geode.tools.plan import BoundToolPlan

MAX_PLANS = 256


class PlanCache:
    """LRU of plans; a call is only accepted against a plan whose hash *and* generation were bound."""

    def __init__(self, capacity: int = MAX_PLANS) -> None:
        self._plans: OrderedDict[tuple[str, int], BoundToolPlan] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def bind(self, plan: BoundToolPlan) -> None:
        key = (plan.content_hash, plan.generation)
        with self._lock:
            self._plans[key] = plan
            self._plans.move_to_end(key)
            while len(self._plans) > self._capacity:
                self._plans.popitem(last=False)

    def get(self, plan_hash: str, generation: int) -> BoundToolPlan | None:
        key = (plan_hash, generation)
        with self._lock:
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
            return plan

    def __len__(self) -> int:
        with self._lock:
            return len(self._plans)
