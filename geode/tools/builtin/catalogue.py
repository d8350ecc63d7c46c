"""The default built-in ToolSpecs with their safety policies, and the handlers that implement them."""

from __future__ import annotations

from typing import Any

from geode.tools.builtin import (
    bash,
    computer,
    delegate,
    files,
    memory,
    messaging,
    schedule_job,
    search,
    send_file,
    use_skill,
    web,
)
from geode.tools.builtin.file_observation import observe_edit, observe_write
from geode.tools.builtin.session_search import session_search as search_sessions
from geode.tools.handlers import HandlerEntry
from geode.tools.spec import ApprovalMode as A
from geode.tools.spec import EffectClass as E
from geode.tools.spec import SafetyPolicy, ToolSpec


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


_S = {"type": "string"}
_PATH = {"type": "string", "minLength": 1}

READ = SafetyPolicy()
WRITE = SafetyPolicy(effect=E.MUTATE, approval=A.CACHED, resource_strategy="file_path")

BUILTIN_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="read_file",
        description="Read a text file (numbered lines); offset = first line (1-based), limit = line count.",
        input_schema=_obj(
            {
                "file_path": _PATH,
                "offset": {"type": "integer", "minimum": 1},
                "limit": {"type": "integer", "minimum": 1},
            },
            ["file_path"],
        ),
        handler="builtin:read_file",
        policy=READ,
        deadline_s=30,
    ),
    ToolSpec(
        name="write_file",
        description="Create or overwrite a file with the given content.",
        input_schema=_obj({"file_path": _PATH, "content": _S}, ["file_path", "content"]),
        handler="builtin:write_file",
        policy=WRITE,
        deadline_s=30,
    ),
    ToolSpec(
        name="edit_file",
        description="Replace an exact string in a file (old_string must be unique unless replace_all).",
        input_schema=_obj(
            {
                "file_path": _PATH,
                "old_string": {"type": "string", "minLength": 1},
                "new_string": _S,
                "replace_all": {"type": "boolean"},
            },
            ["file_path", "old_string", "new_string"],
        ),
        handler="builtin:edit_file",
        policy=WRITE,
        deadline_s=30,
    ),
    ToolSpec(
        name="list_dir",
        description="List a directory's entries (name, type, size).",
        input_schema=_obj({"path": _S}, []),
        handler="builtin:list_dir",
        policy=READ,
        deadline_s=30,
    ),
    ToolSpec(
        name="glob_files",
        description="Find files matching a glob pattern (e.g. **/*.py) under path (default: the workspace).",
        input_schema=_obj({"pattern": {"type": "string", "minLength": 1}, "path": _S}, ["pattern"]),
        handler="builtin:glob_files",
        policy=READ,
        deadline_s=60,
    ),
    ToolSpec(
        name="grep_files",
        description="Search file contents with a regular expression; glob filters file names.",
        input_schema=_obj(
            {"pattern": {"type": "string", "minLength": 1}, "path": _S, "glob": _S}, ["pattern"]
        ),
        handler="builtin:grep_files",
        policy=READ,
        deadline_s=60,
    ),
    ToolSpec(
        name="use_skill",
        description=(
            "Load a skill listed in <available_skills> by name: returns its instructions and its files. "
            "Use it before a task the skill describes."
        ),
        input_schema=_obj({"name": {"type": "string", "minLength": 1, "maxLength": 64}}, ["name"]),
        handler="builtin:use_skill",
        policy=READ,
        deadline_s=30,
    ),
    ToolSpec(
        name="run_bash",
        description="Run a shell command in the workspace (timeout seconds: default 30, max 600).",
        input_schema=_obj(
            {
                "command": {"type": "string", "minLength": 1},
                "timeout": {"type": "integer", "minimum": 1, "maximum": bash.MAX_TIMEOUT_S},
            },
            ["command"],
        ),
        handler="builtin:run_bash",
        policy=SafetyPolicy(
            effect=E.EXECUTE,
            approval=A.CACHED,
            allow_headless=False,
            allow_subagents=False,
            resource_strategy="session",
        ),
        deadline_s=bash.MAX_TIMEOUT_S + 10,
    ),
    ToolSpec(
        name="web_fetch",
        description="Fetch a URL over HTTP(S) and return its readable text.",
        input_schema=_obj({"url": {"type": "string", "minLength": 1}}, ["url"]),
        handler="builtin:web_fetch",
        policy=READ,
        deadline_s=60,
    ),
    ToolSpec(
        name="session_search",
        description=(
            "Search your earlier sessions (the user's messages and your final answers) and memory notes by "
            "words (all must match; word* matches a prefix). Returns session, turn, when and a snippet."
        ),
        input_schema=_obj(
            {
                "query": {"type": "string", "minLength": 1, "maxLength": 500},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20},
            },
            ["query"],
        ),
        handler="builtin:session_search",
        policy=READ,
        deadline_s=30,
    ),
    ToolSpec(
        name="memory_save",
        description=(
            "Keep a note for your future sessions in your memory (MEMORY.md, shown in <agent_memory>): "
            "action add (text: a new entry), replace (match: part of one entry; text: its new wording) or "
            "remove (match: part of one entry). Save durable facts and preferences, not the conversation."
        ),
        input_schema=_obj(
            {
                "action": {"enum": ["add", "replace", "remove"]},
                "text": {"type": "string", "maxLength": 2000},
                "match": {"type": "string", "minLength": 1, "maxLength": 500},
            },
            ["action"],
        ),
        handler="builtin:memory_save",
        policy=SafetyPolicy(effect=E.MUTATE, approval=A.CACHED, resource_strategy="global:memory"),
        deadline_s=30,
    ),
    ToolSpec(
        name="memory_search",
        description="Search your memory's entries by words (all must match, any case).",
        input_schema=_obj({"query": {"type": "string", "minLength": 1, "maxLength": 500}}, ["query"]),
        handler="builtin:memory_search",
        policy=READ,
        deadline_s=30,
    ),
    ToolSpec(
        name="send_message",
        description="Send a message to a recipient on a messenger channel (e.g. channel 'slack:C123').",
        input_schema=_obj(
            {
                "channel": {"type": "string", "minLength": 1},
                "recipient": {"type": "string", "minLength": 1},
                "text": {"type": "string", "minLength": 1},
            },
            ["channel", "recipient", "text"],
        ),
        handler="builtin:send_message",
        policy=SafetyPolicy(effect=E.COMMUNICATE, resource_strategy="channel_recipient"),
        deadline_s=60,
    ),
    ToolSpec(
        name="send_file",
        description=(
            "Send a file from the workspace to this chat as an attachment (a chat's session only; a person "
            "approves each file). path: the file; caption: optional text shown with it."
        ),
        input_schema=_obj(
            {
                "path": {"type": "string", "minLength": 1},
                "caption": {"type": "string", "maxLength": 1024},
                "filename": {"type": "string", "minLength": 1, "maxLength": 255},
            },
            ["path"],
        ),
        handler="builtin:send_file",
        policy=SafetyPolicy(effect=E.COMMUNICATE, approval=A.PER_INVOCATION, resource_strategy="session"),
        deadline_s=120,
    ),
    ToolSpec(
        name="delegate_task",
        description=(
            "Hand a self-contained task to a sub-agent (its own session, fewer tools) and wait for its "
            "answer; timeout_s bounds its time (default 300)."
        ),
        input_schema=_obj(
            {"task": {"type": "string", "minLength": 1}, "timeout_s": {"type": "integer", "minimum": 10}},
            ["task"],
        ),
        handler="builtin:delegate_task",
        policy=SafetyPolicy(
            effect=E.EXECUTE, allow_headless=False, allow_subagents=False, resource_strategy="session"
        ),
        deadline_s=600,
    ),
    ToolSpec(
        name="schedule_job",
        description=(
            "Schedule a prompt to run later, unattended (no approvals), in this session's workspace. "
            "action create: name, exactly one of cron (5 fields) / every ('90s', '15m', '1h', '1d') / at "
            "(ISO time), tz (IANA zone, default UTC), prompt, optional deliver (a bound chat "
            "'telegram:<chat id>') and tools (default: what a chat may use). action list: the jobs. "
            "action cancel: name (a job you made)."
        ),
        input_schema=_obj(
            {
                "action": {"enum": ["create", "list", "cancel"]},
                "name": {"type": "string", "minLength": 1, "maxLength": 64},
                "cron": _S,
                "every": _S,
                "at": _S,
                "tz": _S,
                "prompt": {"type": "string", "minLength": 1},
                "deliver": _S,
                "tools": {"type": "array", "items": {"type": "string", "minLength": 1}},
            },
            ["action"],
        ),
        handler="builtin:schedule_job",
        # DAEMON only where a chat's binding sets allow_schedule (geode/tools/schedule_rule.py)
        policy=SafetyPolicy(
            effect=E.MUTATE, allow_headless=False, allow_subagents=False, resource_strategy="global:schedule"
        ),
        deadline_s=60,
    ),
    ToolSpec(
        name="computer",
        description="Control the desktop: screenshot, mouse moves and clicks, typing and keys.",
        input_schema=_obj(
            {
                "action": {
                    "enum": [
                        "screenshot",
                        "mouse_move",
                        "left_click",
                        "right_click",
                        "double_click",
                        "type",
                        "key",
                    ]
                },
                "coordinate": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
                "text": _S,
            },
            ["action"],
        ),
        handler="builtin:computer",
        policy=SafetyPolicy(
            effect=E.EXECUTE, approval=A.CACHED, allow_headless=False, resource_strategy="global:display"
        ),
        deadline_s=600,
    ),
)


def builtin_specs() -> tuple[ToolSpec, ...]:
    return BUILTIN_SPECS


def builtin_handlers() -> dict[str, HandlerEntry]:
    """Handler identity → implementation, with the path arguments policy must check."""
    return {
        "builtin:read_file": HandlerEntry(files.read_file, ("file_path",)),
        "builtin:write_file": HandlerEntry(files.write_file, ("file_path",), observe=observe_write),
        "builtin:edit_file": HandlerEntry(files.edit_file, ("file_path",), observe=observe_edit),
        "builtin:list_dir": HandlerEntry(files.list_dir, ("path",)),
        "builtin:glob_files": HandlerEntry(search.glob_files, ("path",), inline=True),
        "builtin:grep_files": HandlerEntry(search.grep_files, ("path",), inline=True),
        "builtin:use_skill": HandlerEntry(use_skill.use_skill),
        "builtin:run_bash": HandlerEntry(bash.run_bash, deadline=bash.deadline),  # always asks a person
        "builtin:web_fetch": HandlerEntry(web.web_fetch),
        "builtin:session_search": HandlerEntry(search_sessions),  # the calling session's scope only
        "builtin:memory_save": HandlerEntry(memory.memory_save),  # the session's own scope (ctx.scope)
        "builtin:memory_search": HandlerEntry(memory.memory_search),
        "builtin:send_message": HandlerEntry(messaging.send_message),
        "builtin:send_file": HandlerEntry(send_file.send_file, ("path",)),  # read through the file-tool roots
        "builtin:delegate_task": HandlerEntry(delegate.delegate_task),
        "builtin:schedule_job": HandlerEntry(schedule_job.schedule_job),
        "builtin:computer": HandlerEntry(computer.computer),
    }
