"""``messenger.send_file`` in the messengers child: a file posted to a bound chat at most once per idempotency
key in this process's lifetime (the platform actor's ledger, as ``messenger.send``), through the platform's
SDK (``geode.messengers.uploads``). The executor's receipt keeps it at most once across restarts."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from geode import faults
from geode.messengers.observe import posting_as
from geode.messengers.uploads import checked_bytes, upload
from geode.protocol import messengers as messengers_msg
from geode.protocol.errors import BadRequest, ErrorCode, GeodeError, Unavailable


class Child(Protocol):
    """What of the child (``actors.messengers.MessengersChild``) a file's post reads."""

    actors: dict[str, Any]
    runners: dict[str, Any]
    pollers: dict[str, Any]
    disabled: dict[str, str]
    bindings: Any
    idle: threading.Condition


SEND_TIMEOUT_S = 55.0  # below the executor's wait, so a slow upload answers "timeout" to it first


def send_file_once(child: Child, b: messengers_msg.SendFile) -> messengers_msg.MessageSent:
    platform, _, key = b.channel.partition(":")
    if platform in child.runners and platform not in child.actors:  # served before the actors start
        with child.idle:
            child.idle.wait_for(lambda: platform in child.actors, SEND_TIMEOUT_S)
    ref = child.actors.get(platform)
    if ref is None:
        why = child.disabled.get(platform) or "no poller runs for it"
        raise Unavailable(
            f"the {platform or b.channel!r} messenger platform is not enabled: {why}; nothing was posted"
        )
    if not key or child.bindings.find_channel(platform, key) is None:
        raise BadRequest(
            f"{b.channel!r} is not a bound chat: files go only to bound chats; nothing was posted"
        )
    data = checked_bytes(b)
    actor = ref.proxy()
    seen = actor.reserve(b.idempotency_key).get(timeout=5.0)
    if isinstance(seen, messengers_msg.MessageSent):
        return seen.model_copy(update={"duplicate": True})
    if seen is not None:
        raise GeodeError(
            f"{b.idempotency_key!r} was posted before by this process and its outcome is {seen}; "
            "not posting it again",
            code=ErrorCode.CONFLICT,
        )
    outcome: messengers_msg.MessageSent | str | None = "unknown"
    try:
        posting = posting_as(b.idempotency_key, upload(child.pollers[platform], key, b, data))
        ids = child.runners[platform].submit(posting, SEND_TIMEOUT_S)
        outcome = messengers_msg.MessageSent(
            platform=platform, message_id=ids[0] if ids else "", message_ids=ids
        )
        faults.fault("messengers.after_upload")  # uploaded; the executor not answered
        return outcome
    except (BadRequest, Unavailable):
        outcome = None  # refused before anything was posted
        raise
    finally:
        actor.record(b.idempotency_key, outcome)
