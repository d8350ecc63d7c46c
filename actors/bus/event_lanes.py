"""The subscribers of one endpoint's events (``Bus.subscribe``): one SUB socket per endpoint, each subscriber
its own lane.

A child subscribes to the supervisor's events three to five times (the exit failer, ``geode reload``, its own
lifecycle handler...). Each subscriber keeps what a SUB socket and a one-thread pool of its own gave it: its
events in the order published, on a thread of its own, so a slow handler (the reload rule applies a config and
makes a 5 s call) never holds up another (the exit failer fails the calls in flight at once). But the events
arrive on one SUB socket per endpoint, and a lane's thread runs only while it has events to run: it starts
when an event comes for an idle lane and ends when its queue is empty. Events are rare (a child's start, exit,
retire, a reload), so at rest no subscription thread exists (about 25 threads and 16 sockets fewer in the
tree: each idle thread cost its child ~18-66 KiB of private pages).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from actors.bus.handler_pool import HandlerPool

log = logging.getLogger(__name__)

EventHandler = Callable[[str, dict[str, Any]], None]


class EventLane:
    """One subscriber: its events run in order, on a thread that exists while it has events to run."""

    def __init__(self, on_event: EventHandler, name: str) -> None:
        self.on_event = on_event
        self.name = name
        self._q: deque[tuple[str, dict[str, Any]]] = deque()
        self._lock = threading.Lock()
        self._running = False
        self._stopped = False
        self.threads_started = 0  # (tests: one thread per burst of events, none at rest)

    def put(self, topic: str, body: dict[str, Any]) -> None:
        with self._lock:
            if self._stopped:
                return
            self._q.append((topic, body))
            if self._running:  # its thread takes it next
                return
            self._running = True
            self.threads_started += 1
        try:
            threading.Thread(target=self._drain, name=self.name, daemon=True).start()
        except RuntimeError:  # no thread can start (interpreter shutting down): drop, as a stopped pool
            with self._lock:
                self._running = False
                self._q.clear()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._q:
                    self._running = False
                    return
                topic, body = self._q.popleft()
            try:
                self.on_event(topic, body)
            except Exception:  # a handler bug must not end the lane
                log.exception("%s: event handler failed", self.name)

    def stop(self) -> None:
        """No event runs after what is queued now (a running handler finishes its queue, as a pool's)."""
        with self._lock:
            self._stopped = True

    @property
    def active(self) -> bool:
        with self._lock:
            return self._running


class EventLanes(HandlerPool):
    """The subscribers of one endpoint, as the bus's ``Sub.pool``: the bus thread hands it each event's
    fan-out (:meth:`deliver`, via ``submit``), which only queues the event on every lane (it never blocks)."""

    def __init__(self, endpoint: str) -> None:  # no HandlerPool thread: the lanes have their own
        self.endpoint = endpoint
        self.name = f"{endpoint}-events"
        self.max_backlog = 0
        self.lanes: list[EventLane] = []

    def add(self, on_event: EventHandler) -> None:
        self.lanes.append(EventLane(on_event, f"{self.name}-{len(self.lanes)}"))

    def deliver(self, topic: str, body: dict[str, Any]) -> None:
        """Queue an event for every subscriber (each gets the same decoded body: handlers only read it)."""
        for lane in list(self.lanes):
            lane.put(topic, body)

    def submit(self, job: Callable[[], None]) -> None:
        job()  # the fan-out itself (``partial(deliver, topic, body)``): quick, on the bus thread

    def full(self) -> bool:
        return False

    def stop(self) -> None:
        for lane in self.lanes:
            lane.stop()


__all__ = ["EventLane", "EventLanes"]
