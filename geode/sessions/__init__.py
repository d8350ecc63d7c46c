"""Session composition: the mode table (DESIGN.md §6) and ``create_session``."""

from geode.sessions.factory import SessionSpec, create_session
from geode.sessions.modes import MODES, SessionMode, default_denylist

__all__ = ["MODES", "SessionMode", "SessionSpec", "create_session", "default_denylist"]
