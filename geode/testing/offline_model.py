"""A model to try GEODE with no API key and no network: a reply function for the scripted provider's
``--function`` mode (``geode scripted-provider --function geode.testing.offline_model``).

It answers from the last message of each request, so a hand-typed chat never gets out of step (a scenario
file serves its replies in one global order). ``list [DIR]``, ``read FILE``, ``find PATTERN``, ``write FILE
TEXT`` and ``run COMMAND`` propose the matching built-in tool call (when the request offers that tool), so a
new user sees a tool round and, for ``write`` and ``run``, an approval prompt; after the tool results it says
what came back. Anything else is echoed with the list of words it understands.
"""

from __future__ import annotations

import json
from typing import Any

from geode.testing.scenario import RecordedRequest

RESULT_CHARS = 600  # of each tool result quoted back

# the first word of the user's message -> the built-in tool it proposes
_VERBS: dict[str, str] = {
    "list": "list_dir",
    "ls": "list_dir",
    "read": "read_file",
    "cat": "read_file",
    "find": "glob_files",
    "write": "write_file",
    "run": "run_bash",
}

HELP = (
    "I am GEODE's offline example model: no network, no API key, I only understand a few words. Try:\n"
    "  list [DIR]          list a directory (list_dir)\n"
    "  read FILE           read a file (read_file)\n"
    "  find PATTERN        find files, e.g. find **/*.md (glob_files)\n"
    "  write FILE TEXT     write a file (write_file: asks for your approval)\n"
    "  run COMMAND         run a shell command (run_bash: asks for your approval)\n"
    "Anything else I echo back."
)


def reply(request: RecordedRequest) -> dict[str, Any]:
    """The answer to one request (Anthropic Messages or OpenAI Chat Completions wire)."""
    body = request.body if isinstance(request.body, dict) else {}
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    results = _tool_results(messages)
    if results:
        return {"text": _report(results)}
    return _answer(_last_user_text(messages), _offered(body))


def _answer(text: str, offered: set[str]) -> dict[str, Any]:
    words = text.split(maxsplit=1)
    verb = words[0].lower() if words else ""
    rest = words[1].strip() if len(words) > 1 else ""
    tool = _VERBS.get(verb)
    if tool is None:
        if verb in ("help", "?", "hi", "hello"):
            return {"text": HELP}
        return {"text": f"You said: {text}\n\n{HELP}" if text else HELP}
    if tool not in offered:
        return {"text": f"{tool} is not offered to me in this session, so I cannot {verb} here."}
    call_input = _input_for(tool, rest)
    if call_input is None:
        return {"text": f"{verb} needs an argument.\n\n{HELP}"}
    return {
        "text": f"I will call {tool} for you.",
        "tool_calls": [{"name": tool, "input": call_input}],
    }


def _input_for(tool: str, rest: str) -> dict[str, Any] | None:
    if tool == "list_dir":
        return {"path": rest} if rest else {}
    if not rest:
        return None
    if tool == "read_file":
        return {"file_path": rest}
    if tool == "glob_files":
        return {"pattern": rest}
    if tool == "run_bash":
        return {"command": rest}
    path, _, content = rest.partition(" ")  # write_file
    return {"file_path": path, "content": content + "\n" if content else ""}


def _offered(body: dict[str, Any]) -> set[str]:
    """Tool names the request offers (Anthropic ``name``; OpenAI ``function.name``)."""
    out: set[str] = set()
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            fn = t.get("function")
            name = fn.get("name") if isinstance(fn, dict) else t.get("name")
            if isinstance(name, str):
                out.add(name)
    return out


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            return _text_of(m.get("content")).strip()
    return ""


def _tool_results(messages: list[dict[str, Any]]) -> list[tuple[str, bool, str]]:
    """``(tool name, is_error, text)`` per result when the last message carries tool results, else ``[]``."""
    if not messages:
        return []
    names = _call_names(messages)
    last = messages[-1]
    if last.get("role") == "tool":  # OpenAI: one message per result, the trailing run of them
        out: list[tuple[str, bool, str]] = []
        for m in reversed(messages):
            if m.get("role") != "tool":
                break
            out.append((names.get(str(m.get("tool_call_id")), "tool"), False, _text_of(m.get("content"))))
        return out[::-1]
    content = last.get("content")
    if last.get("role") != "user" or not isinstance(content, list):
        return []
    return [
        (names.get(str(b.get("tool_use_id")), "tool"), bool(b.get("is_error")), _text_of(b.get("content")))
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


def _call_names(messages: list[dict[str, Any]]) -> dict[str, str]:
    """Tool call id -> tool name, from the assistant messages (both wires)."""
    out: dict[str, str] = {}
    for m in messages:
        if m.get("role") != "assistant":
            continue
        content = m.get("content")
        for b in content if isinstance(content, list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_use":
                out[str(b.get("id"))] = str(b.get("name"))
        for c in m.get("tool_calls") or []:
            if isinstance(c, dict) and isinstance(c.get("function"), dict):
                out[str(c.get("id"))] = str(c["function"].get("name"))
    return out


def _report(results: list[tuple[str, bool, str]]) -> str:
    parts = []
    for name, is_error, text in results:
        shown = _pretty(text)
        cut = f"\n… ({len(shown) - RESULT_CHARS} more characters)" if len(shown) > RESULT_CHARS else ""
        head = f"{name} {'failed or was refused' if is_error else 'returned'}:"
        parts.append(f"{head}\n{shown[:RESULT_CHARS]}{cut}")
    return "\n\n".join(parts)


def _pretty(text: str) -> str:
    """A result as a person would read it: a listing's names, a file's or command's text, an error's
    message; any other JSON compact, anything else as it is."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if not isinstance(data, dict):
        return json.dumps(data, ensure_ascii=False)
    if isinstance(data.get("entries"), list):
        names = [f"{e.get('name')}{'/' if e.get('type') == 'dir' else ''}" for e in data["entries"]]
        return f"{data.get('path', '')}: {'  '.join(names)}"
    for key in ("error", "content", "stdout", "files", "matches"):
        if data.get(key):
            value = data[key]
            shown = value if isinstance(value, str) else "\n".join(map(str, value))
            return shown.rstrip() + (f"\n(exit code {data['exit_code']})" if "exit_code" in data else "")
    return json.dumps(data, ensure_ascii=False)
