"""The small ports the messenger poller runs against: the platform translator, the store, lanes and the
executor's reply delivery. The process shell passes bus-backed ones; a test passes in-process fakes."""

from __future__ import annotations

from typing import Any, Protocol

from geode.messengers.model import Batch
from geode.protocol import lanes as lanes_msg
from geode.protocol import messengers as messengers_msg
from geode.records.models import TurnRecord


class Translator(Protocol):
    """One platform's SDK behind the platform-neutral calls (``geode.messengers.telegram``, ``slack``,
    ``discord``). Async; every platform failure is a ``geode.messengers.errors.PlatformError``. ``poll``
    returns a :class:`Batch`; ``confirm(batch)`` runs once every turn of it is recorded and its cursor
    (if any) stored (Slack acks the envelopes there)."""

    platform: str
    bot_id: Any

    async def start(self) -> str: ...
    async def poll(self, cursor: str | None) -> Batch: ...
    async def confirm(self, batch: Batch) -> None: ...
    async def send_text(self, channel_key: str, text: str, *, reply_to: str = "") -> list[str]: ...
    async def typing(self, channel_key: str) -> None: ...
    async def ask_approval(self, channel_key: str, text: str, buttons: list[tuple[str, str]]) -> str: ...
    async def answer_press(self, callback_id: str, text: str = "") -> None: ...
    async def edit_text(self, channel_key: str, message_id: str, text: str) -> None: ...
    async def close(self) -> None: ...


class StorePort(Protocol):
    """Blocking store calls (``geode.records.store_client.StoreClient`` has them)."""

    def get_cursor(self, platform: str, account: str, channel: str) -> str | None: ...
    def set_cursor(self, platform: str, account: str, channel: str, position: str) -> None: ...
    def get_turn(self, turn_id: str) -> TurnRecord | None: ...
    def dedupe(self, key: str, *, ttl_s: float) -> bool: ...  # True the first time ``key`` is seen


class LanesPort(Protocol):
    """Blocking lanes calls: submit a turn (idempotent by turn id), answer an approval."""

    def submit(self, sub: lanes_msg.Submit) -> lanes_msg.Submitted: ...
    def approval_reply(self, reply: lanes_msg.ApprovalReply) -> bool: ...


class DeliverPort(Protocol):
    """The executor's ``messenger.deliver`` (a reply posted once, as a receipted effect)."""

    def deliver(self, req: messengers_msg.DeliverReply) -> messengers_msg.Delivered: ...
