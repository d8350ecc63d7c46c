"""computer: screenshot, mouse and keyboard through xdotool and a screenshot tool when a display exists."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from typing import Any

from geode.tools.handlers import ToolEnv, ToolFailure

SCREENSHOT_TOOLS = (("import", ["-window", "root", "png:-"]), ("scrot", ["-o", "/dev/stdout"]))


def availability() -> str | None:
    """``None`` when computer use can work here, else the reason it cannot."""
    if not os.environ.get("DISPLAY"):
        return "no display (DISPLAY is not set)"
    if shutil.which("xdotool") is None:
        return "xdotool is not installed"
    return None


def _xdotool(*argv: str, timeout: float) -> None:
    proc = subprocess.run(["xdotool", *argv], capture_output=True, timeout=timeout)
    if proc.returncode != 0:
        raise ToolFailure(f"xdotool failed: {proc.stderr.decode(errors='replace')[:300]}", "computer_failed")


def _screenshot(timeout: float) -> dict[str, Any]:
    for tool, argv in SCREENSHOT_TOOLS:
        if shutil.which(tool):
            proc = subprocess.run([tool, *argv], capture_output=True, timeout=timeout)
            if proc.returncode == 0 and proc.stdout:
                return {
                    "type": "image",
                    "media_type": "image/png",
                    "data": base64.b64encode(proc.stdout).decode(),
                }
    raise ToolFailure("no screenshot tool (ImageMagick import or scrot) is available", "tool_unavailable")


def computer(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
    why = availability()
    if why is not None:
        raise ToolFailure(f"Computer use is unavailable: {why}.", "tool_unavailable")
    action, t = args["action"], min(30.0, env.deadline_s)
    if action == "screenshot":
        return {"action": action, "image": _screenshot(t)}
    if action in ("mouse_move", "left_click", "right_click", "double_click"):
        x, y = args.get("coordinate", [None, None])[:2] if args.get("coordinate") else (None, None)
        if x is None or y is None:
            raise ToolFailure(f"{action} needs coordinate [x, y]", "invalid_tool_input")
        _xdotool("mousemove", str(int(x)), str(int(y)), timeout=t)
        clicks = {
            "left_click": ["click", "1"],
            "right_click": ["click", "3"],
            "double_click": ["click", "--repeat", "2", "1"],
        }
        if action in clicks:
            _xdotool(*clicks[action], timeout=t)
        return {"action": action, "coordinate": [x, y]}
    if action == "type":
        _xdotool("type", "--delay", "20", "--", str(args.get("text", "")), timeout=t)
        return {"action": action}
    if action == "key":
        _xdotool("key", "--", str(args.get("text", "")), timeout=t)
        return {"action": action}
    raise ToolFailure(f"unknown computer action {action!r}", "invalid_tool_input")
