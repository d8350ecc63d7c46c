"""Claude-Code-format hook scripts written into a temp dir, invoked as `python <script>`."""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPTS = {
    "deny": """
import json, sys
json.load(sys.stdin)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                  "permissionDecisionReason": "denied by policy script"}}))
""",
    "ask": """
import json, sys
json.load(sys.stdin)
print(json.dumps({"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "check"}}))
""",
    "exit2": """
import sys
sys.stdin.read()
sys.stderr.write("exit-2 says no")
sys.exit(2)
""",
    "hang": """
import time
time.sleep(60)
""",
    "crash": """
raise SystemExit(3)
""",
    "garbage": """
print("this is not json")
""",
    "dump": """
import json, os, sys
data = json.load(sys.stdin)
open(os.environ["HOOK_DUMP"], "w").write(json.dumps(data))
""",
    "rewrite_path": """
import json, os, sys
data = json.load(sys.stdin)
inp = dict(data["tool_input"])
inp["file_path"] = os.environ["HOOK_NEW_PATH"]
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                  "updatedInput": inp}}))
""",
    "rename": """
import json, os, sys
json.load(sys.stdin)
out = {"updatedToolName": os.environ["HOOK_NEW_TOOL"], "updatedInput": {}}
print(json.dumps({"hookSpecificOutput": out}))
""",
    "context": """
import json, sys
json.load(sys.stdin)
out = {"hookEventName": "PostToolUse", "additionalContext": "ctx from hook"}
print(json.dumps({"hookSpecificOutput": out}))
""",
    "withhold": """
import json, sys
json.load(sys.stdin)
print(json.dumps({"decision": "block", "reason": "secret output"}))
""",
    "stop_block": """
import json, sys
json.load(sys.stdin)
print(json.dumps({"decision": "block", "reason": "tests are still failing; fix them"}))
""",
}


def write_scripts(directory: Path) -> dict[str, str]:
    """name → shell command running that script with this interpreter."""
    out = {}
    for name, body in SCRIPTS.items():
        path = directory / f"{name}.py"
        path.write_text(body.lstrip())
        out[name] = f"{sys.executable} {path}"
    return out
