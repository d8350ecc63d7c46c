"""Messages of the webhooks area (``webhooks.*``, served by the ``webhooks`` child): what ``geode webhooks``
asks the child that receives signed HTTP deliveries and runs each as an AUTOMATION turn. ``webhooks.routes``
lists the configured routes with their counters; ``webhooks.replay`` re-runs a stored delivery under a new
delivery id ``<old>.replay-<n>`` (origin ``replay``), its original untouched.

Every refusal is a one-line error (``bad_request``: an ambiguous or invalid request; ``not_found``: no stored
delivery by that id); nothing is recorded when a request is refused.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from geode.protocol.catalog import message


class RouteCounters(BaseModel):
    """One route's counters since the child started (``queued`` and ``done`` are the intake table's; a 503
    for a full queue is counted in ``rejected["queue_full"]``)."""

    accepted: int = 0  # 202: a new intake recorded
    replayed: int = 0  # 200: a delivery seen before (nothing recorded)
    rejected: dict[str, int] = Field(default_factory=dict)  # reason (missing, bad_signature, ...) -> count
    rate_limited: int = 0  # 429
    queued: int = 0  # the route's queue now: intakes whose turn has not ended (recorded or submitted)
    done: int = 0  # intakes done (answered and delivered, or nothing to deliver)


class RouteView(BaseModel):
    """One configured route (never its secrets: only what a reader may see)."""

    name: str
    path: str
    auth: str
    deliver: str = ""
    counters: RouteCounters = Field(default_factory=RouteCounters)


class ListRoutes(BaseModel):
    """Every configured route with its counters (``geode webhooks``)."""


class RoutesReply(BaseModel):
    listen: str = ""  # the address the child serves ("host:port")
    routes: list[RouteView] = Field(default_factory=list)


class Replay(BaseModel):
    """Re-run a stored delivery: recorded again under ``<delivery_id>.replay-<n>`` (origin ``replay``) and
    submitted as a new turn. ``route`` narrows the lookup when two routes hold the same delivery id."""

    delivery_id: str = Field(min_length=1, max_length=256)
    route: str = Field(default="", max_length=64)


class ReplayReply(BaseModel):
    route: str
    delivery_id: str  # the new delivery id (``<old>.replay-<n>``)
    turn_id: str
    status_url: str  # the path of the status url (``/status/<turn_id>?token=...``)


ROUTES = message("webhooks.routes", ListRoutes, RoutesReply)
REPLAY = message("webhooks.replay", Replay, ReplayReply)
