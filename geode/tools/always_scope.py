"""What an "always" answer covers: for a shell command the exact (normalized) command, never the program it
starts; for other rememberable tools the tool. The same rule names the scope in every approval prompt."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from geode.tools.spec import ApprovalMode, DataClass, SafetyPolicy

# tools whose "always" is keyed by one string argument: the command, not the program (bash, python, sh …)
COMMAND_ARG = {"run_bash": "command"}


def rememberable(policy: SafetyPolicy) -> bool:
    """Whether "always" may be remembered at all (cached approval, no personal data)."""
    return policy.approval is ApprovalMode.CACHED and policy.data_class is not DataClass.PERSONAL


def normalize_command(command: str) -> str:
    """``command`` with surrounding blanks dropped and, on a one-line command, runs of spaces and tabs outside
    quotes made one space: two spellings the shell splits into the same words. Nothing else changes (quotes,
    separators, a heredoc's lines stay as written), so a different command never gets the same key."""
    text = command.strip()
    if "\n" in text:
        return text
    out: list[str] = []
    quote = ""
    escaped = blank = False  # blank: the last character kept is a separating (unquoted, unescaped) blank
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in " \t":
            if not blank:
                out.append(" ")
            blank = True
            continue
        out.append(ch)
        blank = False
    return "".join(out)


def always_key(tool_name: str, arguments: Mapping[str, Any]) -> str:
    """The key an "always" for this call is remembered under (and later calls are looked up by)."""
    arg = COMMAND_ARG.get(tool_name)
    if arg is None:
        return tool_name
    return f"{tool_name}\x00{normalize_command(str(arguments.get(arg, '')))}"


def covers(tool_name: str, policy: SafetyPolicy) -> str:
    """What "a always" covers, as the prompt says it; "" when "always" is not offered."""
    if not rememberable(policy):
        return ""
    if tool_name in COMMAND_ARG:
        return "this exact command, for the rest of this session (any other command asks again)"
    return f"every {tool_name} call, for the rest of this session"
