"""Reply text as Slack ``mrkdwn``: ``&``, ``<`` and ``>`` escaped (so a reply can never ping ``<!channel>``
or forge a mention or a link), and the common Markdown a model writes turned into Slack's own markup."""

from __future__ import annotations

import re

_CODE = re.compile(r"(```[\s\S]*?```|`[^`\n]+`)")
_FENCE_LANG = re.compile(r"^```[A-Za-z0-9_+.#-]*\n")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s|>]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")  # not __x__: models write __init__ for the name
_ITALIC = re.compile(r"(?<![*\w])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"(?m)^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$")


def escape(text: str) -> str:
    """The three characters Slack's text encoding reserves."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _prose(text: str) -> str:
    links: list[str] = []

    def keep_link(m: re.Match[str]) -> str:
        links.append(f"<{escape(m.group(2))}|{escape(m.group(1))}>")
        return f"\x00{len(links) - 1}\x00"

    text = _LINK.sub(keep_link, text)
    text = escape(text)
    text = _ITALIC.sub(r"_\1_", text)  # before bold: *x* is italic in Markdown, bold in mrkdwn
    text = _BOLD.sub(r"*\1*", text)
    text = _STRIKE.sub(r"~\1~", text)
    text = _HEADING.sub(r"*\1*", text)
    return re.sub(r"\x00(\d+)\x00", lambda m: links[int(m.group(1))], text)


def to_mrkdwn(text: str) -> str:
    """``text`` (Markdown or plain) as Slack mrkdwn. Code spans and fences keep their content (escaped
    only; a fence's language tag is dropped, Slack would show it as code)."""
    out = []
    for i, piece in enumerate(_CODE.split(text)):
        if i % 2:  # a code span or fence
            out.append(escape(_FENCE_LANG.sub("```\n", piece)))
        else:
            out.append(_prose(piece))
    return "".join(out)
