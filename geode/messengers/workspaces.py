"""Where a chat's turns run: each bound chat gets its own workspace (the file tools of its sessions are rooted
there), so what one chat writes another chat's session cannot read.

``$GEODE_HOME/workspaces/<platform>-<channel>`` by default (beside the jobs' ``job-<name>``), or the binding's
``workspace`` key. Inbound files of a chat are saved under it too (``inbox/<message-id>/``)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from geode.home import GeodeHome
from geode.messengers.config import MessengerBinding
from geode.protocol.errors import ConfigError

WORKSPACES = "workspaces"  # $GEODE_HOME/workspaces: chats' and scheduled jobs' default workspaces
_UNSAFE = re.compile(r"[^A-Za-z0-9.\-]")  # ids: digits, letters, '-', '.'; ':' (a topic) and the rest -> '_'


def chat_dir_name(binding: MessengerBinding) -> str:
    """``<platform>-<channel_id>`` with every character but letters, digits, ``.`` and ``-`` replaced by
    ``_`` (``telegram--100123_7`` for the topic ``-100123:7``): one name per binding, never a path."""
    return f"{binding.platform}-{_UNSAFE.sub('_', binding.channel_id)}"


def chat_workspace(binding: MessengerBinding, home: GeodeHome) -> Path:
    """The workspace of ``binding``'s chat, created 0700 on first use: the binding's ``workspace`` (an
    absolute path, ``~`` expanded), else ``$GEODE_HOME/workspaces/<platform>-<channel>``. A directory that
    cannot be made is a one-line ConfigError naming the binding and the path."""
    if binding.workspace:
        ws = Path(binding.workspace).expanduser()
        if not ws.is_absolute():  # the config refuses it; a hand-built binding too
            raise ConfigError(f"{_what(binding)}: workspace {binding.workspace!r} is not an absolute path")
        _make(ws, binding)
        return ws
    ws = home.root / WORKSPACES / chat_dir_name(binding)
    _make(ws, binding)
    try:
        os.chmod(ws, 0o700)  # ours: kept private even when made looser by hand
    except OSError:
        pass
    return ws


def _what(binding: MessengerBinding) -> str:
    return f"messenger binding {binding.platform} {binding.channel_id!r}"


def _make(ws: Path, binding: MessengerBinding) -> None:
    try:
        ws.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{_what(binding)}: workspace {ws}: cannot create it: {exc.strerror}") from exc
    if not ws.is_dir():
        raise ConfigError(f"{_what(binding)}: workspace {ws} is not a directory")
