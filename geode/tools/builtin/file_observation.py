"""What write_file and edit_file would leave, worked out at admission (before the handler runs), so an effect
whose outcome becomes unknown can be settled by looking at the file (geode/tools/observation.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from geode.records.models import Observation
from geode.tools.builtin.fs_guard import Refused, read_regular
from geode.tools.observation import NOT_A_FILE, file_observation, file_state
from geode.tools.paths import Boundary, InvalidPath, PathOutsideRoots, checked_path

MAX_OBSERVED_BYTES = 5 * 1024 * 1024  # edit_file reads at most this much (its own limit)


def _path(args: dict[str, Any], workspace: Path, roots: tuple[Path, ...]) -> Path | None:
    try:
        return checked_path(workspace, roots, str(args.get("file_path") or ""))
    except (InvalidPath, PathOutsideRoots):
        return None  # the handler refuses it: nothing to observe


def observe_write(args: dict[str, Any], workspace: Path, roots: tuple[Path, ...]) -> Observation | None:
    """The file's state now (sha256 or ``absent``) and the sha256 of ``content``."""
    path = _path(args, workspace, roots)
    content = args.get("content")
    if path is None or not isinstance(content, str):
        return None
    before = file_state(str(path))
    if before == NOT_A_FILE:
        return None  # write_file refuses it
    return file_observation(str(path), before, content.encode("utf-8"))


def observe_edit(args: dict[str, Any], workspace: Path, roots: tuple[Path, ...]) -> Observation | None:
    """The file's sha256 now and the sha256 of the text the edit would leave (None: the edit cannot apply)."""
    path = _path(args, workspace, roots)
    old, new = args.get("old_string"), args.get("new_string")
    if path is None or not isinstance(old, str) or not isinstance(new, str) or not old or old == new:
        return None
    try:
        data = read_regular(path, Boundary.of(roots), MAX_OBSERVED_BYTES)
        text = data.decode("utf-8") if data is not None else None
    except (FileNotFoundError, Refused, UnicodeDecodeError, OSError):
        return None
    if data is None or text is None:
        return None
    count = text.count(old)
    if count == 0 or (count > 1 and not args.get("replace_all")):
        return None
    updated = text.replace(old, new) if args.get("replace_all") else text.replace(old, new, 1)
    before = hashlib.sha256(data).hexdigest()
    return file_observation(str(path), before, updated.encode("utf-8"))

