#!/usr/bin/env python3
"""Example Claude-Code-format PreToolUse hook: deny Bash commands that contain `rm -rf`."""

import json
import sys

event = json.load(sys.stdin)
command = (event.get("tool_input") or {}).get("command", "")
if event.get("tool_name") == "Bash" and "rm -rf" in command:
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                             "permissionDecisionReason": "rm -rf is not allowed here"}}))
sys.exit(0)
