"""Pressing a button by its label, for the local servers' ``/_local/press`` demo endpoints: a hand demo cannot
know a keyboard's callback data (an approval's is a hash of its id), so it names the button ("Approve") and
the chat, and the press goes to the newest message of the bot in that chat that still shows that button."""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]
# the servers (LocalBotApi, LocalSlack, LocalDiscord) come in as Any: this module imports none of them


class NoSuchButton(ValueError):
    """No post of the bot in that chat shows a button with that label (an answered keyboard drops it)."""

    def __init__(self, where: str, label: str) -> None:
        super().__init__(f"no message of the bot in {where} shows a button {label!r}")


def telegram_target(api: Any, chat_id: int, label: str) -> tuple[int, str]:
    """(message id, callback data) of the newest post in ``chat_id`` with an inline button ``label``."""
    for post in reversed(api.posts(int(chat_id))):
        for row in (post.get("reply_markup") or {}).get("inline_keyboard", []):
            for button in row:
                if button.get("text") == label and button.get("callback_data"):
                    return int(post["message_id"]), str(button["callback_data"])
    raise NoSuchButton(f"chat {chat_id}", label)


def slack_target(slack: Any, channel: str, label: str) -> tuple[str, str, str]:
    """(message ts, action id, value) of the newest post in ``channel`` with a Block Kit button ``label``."""
    for post in reversed(slack.posts(channel)):
        for block in post.get("blocks") or ():
            for element in block.get("elements") or ():
                text = (element.get("text") or {}).get("text")
                if element.get("type") == "button" and text == label:
                    return str(post["ts"]), str(element["action_id"]), str(element.get("value", ""))
    raise NoSuchButton(f"channel {channel}", label)


def discord_target(dc: Any, channel_id: int, label: str) -> tuple[int, str]:
    """(message id, custom id) of the newest post in ``channel_id`` (a thread's id for one in a thread) with a
    button component ``label``."""
    for post in reversed(dc.posts(int(channel_id))):
        for row in post.get("components") or ():
            for button in row.get("components") or ():
                if button.get("label") == label and button.get("custom_id"):
                    return int(post["message_id"]), str(button["custom_id"])
    raise NoSuchButton(f"channel {channel_id}", label)


def telegram_press(api: Any, chat_id: int, button: str, **who: Any) -> JSON:
    """Queue a press on ``button`` (``sender_id``, ``username`` in ``who``) as a callback_query update."""
    message_id, data = telegram_target(api, chat_id, button)
    return api.push_callback(int(chat_id), message_id, data, **who)


def slack_press(slack: Any, channel: str, button: str, **who: Any) -> JSON:
    """Queue a press on ``button`` (``user`` in ``who``) as a block_actions interactive envelope."""
    ts, action_id, value = slack_target(slack, channel, button)
    return slack.push_action(channel, ts, action_id, value, **who)


def discord_body(dc: Any, body: JSON) -> JSON:
    """``/_local/press``'s body ``{channel_id, button, user_id?, user_name?}`` as ``push_button``'s."""
    message_id, custom_id = discord_target(dc, int(body["channel_id"]), str(body["button"]))
    rest = {k: v for k, v in body.items() if k != "button"}
    return {**rest, "message_id": message_id, "custom_id": custom_id}
