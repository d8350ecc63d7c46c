"""Replies as Slack mrkdwn: reserved characters escaped (no reply can ping <!channel> or forge a mention),
the Markdown a model writes turned into Slack's markup, code left as written."""

from __future__ import annotations

import pytest

from geode.messengers.slack_format import to_mrkdwn
from geode.messengers.slack_text import slack_to_plain


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("ping <!channel> and <@U0ALICE01> & co", "ping &lt;!channel&gt; and &lt;@U0ALICE01&gt; &amp; co"),
        ("**bold**, *italic*, ~~gone~~", "*bold*, _italic_, ~gone~"),
        ("# Title\n## Sub ##\nbody", "*Title*\n*Sub*\nbody"),
        ("see [the docs](https://x.example/a?b=1&c=2)", "see <https://x.example/a?b=1&amp;c=2|the docs>"),
        ("```python\nif a < b: x = '**y**'\n```", "```\nif a &lt; b: x = '**y**'\n```"),
        ("`a<b` and **c**", "`a&lt;b` and *c*"),
        ("* one\n* two\n2 * 3 * 4 and __init__", "* one\n* two\n2 * 3 * 4 and __init__"),
    ],
)
def test_markdown_becomes_escaped_mrkdwn(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


def test_inbound_text_is_unescaped_and_the_bot_mention_named() -> None:
    raw = "<@U0BOT|geode> see <#C0DEV|dev>, <https://x.example> &amp; <https://y.example|y> &lt;3 <@U0BOB>"
    assert slack_to_plain(raw, bot_id="U0BOT", bot_name="geode") == (
        "@geode see #dev, https://x.example & y (https://y.example) <3 <@U0BOB>"
    )
