"""Lifecycle events the supervisor publishes on ``supervisor.events`` (lossy PUB, for observers only).

Nothing durable depends on them: store and lanes learn of a death through ``runtime.child_died`` (retried
until acknowledged); a loop worker uses ``child_exited`` of the executor to fail its in-flight calls at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

log = logging.getLogger(__name__)

CHILD_STARTED = "runtime.event.child_started"
CHILD_READY = "runtime.event.child_ready"
CHILD_EXITED = "runtime.event.child_exited"
TREE_STOPPING = "runtime.event.tree_stopping"
# `geode reload` (body: ConfigReload): each child named re-reads the tree's copy and confirms with
# ``runtime.config_applied`` (a child started since counts as applied; the CLI asks again for the silent)
CONFIG_RELOAD = "runtime.event.config_reload"
# drain-and-swap (body: ChildEvent): the loop worker of that name AND incarnation (forked before the zygote
# had the provider SDKs) takes no new turn, finishes what it runs and exits 0; repeated until it exits (lossy)
CHILD_RETIRE = "runtime.event.child_retire"
TOPICS = (CHILD_STARTED, CHILD_READY, CHILD_EXITED, TREE_STOPPING, CONFIG_RELOAD, CHILD_RETIRE)


CHILD_TOPICS = (CHILD_STARTED, CHILD_READY, CHILD_EXITED)


class ChildEvent(BaseModel):
    """The body of ``child_started`` / ``child_ready`` / ``child_exited`` (``reason`` only on an exit): built
    by the supervisor, validated again by every subscriber (:func:`on_child_events`)."""

    model_config = ConfigDict(frozen=True)
    name: str = Field(min_length=1, max_length=128)
    incarnation: int = Field(ge=0)
    pid: int | None = None
    state: str = Field(default="", max_length=32)
    reason: str = Field(default="", max_length=512)


class TreeEvent(BaseModel):
    """The body of ``tree_stopping``: the supervisor's pid."""

    pid: int


class ConfigReload(BaseModel):
    """The body of ``config_reload``: reload ``stamp`` (`geode reload` names it) for the children named."""

    model_config = ConfigDict(frozen=True)
    stamp: str = Field(min_length=1, max_length=64)
    children: list[str] = Field(default_factory=list, max_length=256)


ChildEventHandler = Callable[[str, ChildEvent], None]


def child_event(topic: str, body: Mapping[str, Any] | None) -> ChildEvent | None:
    """The typed body of a child lifecycle event; None for another topic or a body that is not a
    ``ChildEvent`` (logged with the topic, never raised into the subscriber's thread)."""
    if topic not in CHILD_TOPICS:
        return None
    try:
        return ChildEvent.model_validate(body or {})
    except ValidationError as exc:
        log.warning("lifecycle event %s with a bad body ignored: %s", topic, exc.errors()[0].get("msg", exc))
        return None


EventHandler = Callable[[str, Mapping[str, Any]], None]


def on_retire(name: str, incarnation: int, handler: Callable[[], None], others: EventHandler) -> EventHandler:
    """A ``bus.subscribe("supervisor", ...)`` handler that calls ``handler()`` on a ``child_retire`` for this
    child's name and incarnation (another's, or a bad body, is ignored; the latter logged) and passes every
    other event to ``others`` (one subscription)."""

    def on_event(topic: str, body: Mapping[str, Any]) -> None:
        if topic != CHILD_RETIRE:
            others(topic, body)
            return
        try:
            event = ChildEvent.model_validate(body or {})
        except ValidationError as exc:
            log.warning(
                "lifecycle event %s with a bad body ignored: %s", topic, exc.errors()[0].get("msg", exc)
            )
            return
        if event.name == name and event.incarnation == incarnation:
            handler()

    return on_event


def on_child_events(handler: ChildEventHandler) -> Callable[[str, Mapping[str, Any]], None]:
    """A ``bus.subscribe("supervisor", ...)`` handler that passes ``handler`` each child event, typed."""

    def on_event(topic: str, body: Mapping[str, Any]) -> None:
        event = child_event(topic, body)
        if event is not None:
            handler(topic, event)

    return on_event
