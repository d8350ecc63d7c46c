"""``messenger.send`` and ``messenger.send_file`` in the messengers child: a post (text, or a file through the
platform's SDK, ``geode.messengers.uploads``) to a bound chat at most once per idempotency key in this
process's lifetime (the platform actor's ledger). The executor's receipt keeps it at most once across
restarts."""

from __future__ import annotations

import threading
from collections.abc import Callable
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


def post_once(
    child: Child,
    channel: str,
    idempotency_key: str,
    post: Callable[[Any, str], Any],
    fault_point: str,
) -> messengers_msg.MessageSent:
    """One post to the bound chat ``channel`` at most once per ``idempotency_key`` in this process's
    lifetime (the platform actor's ledger): ``post(poller, channel key)`` makes the posting; a refusal before
    anything was posted is recorded as such, any other end as its outcome (``messenger.send`` and
    ``messenger.send_file`` both)."""
    platform, _, key = channel.partition(":")
    if platform in child.runners and platform not in child.actors:  # served before the actors start
        with child.idle:
            child.idle.wait_for(lambda: platform in child.actors, SEND_TIMEOUT_S)
    ref = child.actors.get(platform)
    if ref is None:
        why = child.disabled.get(platform)
        if why is None:
            enabled = ", ".join(child.actors) or "none"
            why = f"no messenger platform is enabled for {platform or channel!r} (enabled: {enabled})"
        else:
            why = f"the {platform} messenger platform is not enabled: {why}"
        raise Unavailable(f"{why}; nothing was posted")
    if not key or child.bindings.find_channel(platform, key) is None:
        raise BadRequest(
            f"{channel!r} is not a bound chat: posts go only to chats in [[messengers.bindings]] "
            f'(channel "{platform}:<chat_id>[:<thread_id>]"); nothing was posted'
        )
    actor = ref.proxy()
    seen = actor.reserve(idempotency_key).get(timeout=5.0)
    if isinstance(seen, messengers_msg.MessageSent):
        return seen.model_copy(update={"duplicate": True})
    if seen is not None:
        raise GeodeError(
            f"{idempotency_key!r} was posted before by this process and its outcome is {seen}; "
            "not posting it again",
            code=ErrorCode.CONFLICT,
        )
    outcome: messengers_msg.MessageSent | str | None = "unknown"
    try:
        posting = posting_as(idempotency_key, post(child.pollers[platform], key))
        ids = child.runners[platform].submit(posting, SEND_TIMEOUT_S)
        outcome = messengers_msg.MessageSent(
            platform=platform, message_id=ids[0] if ids else "", message_ids=ids
        )
        faults.fault(fault_point)  # posted; the executor not answered
        return outcome
    except (BadRequest, Unavailable):
        outcome = None  # refused before anything was posted
        raise
    finally:
        actor.record(idempotency_key, outcome)


def send_file_once(child: Child, b: messengers_msg.SendFile) -> messengers_msg.MessageSent:
    """``messenger.send_file``: the checked bytes (refused before anything else when the file changed)."""
    data = checked_bytes(b)
    return post_once(
        child,
        b.channel,
        b.idempotency_key,
        lambda poller, key: upload(poller, key, b, data),
        "messengers.after_upload",
    )
