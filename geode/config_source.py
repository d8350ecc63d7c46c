"""One process's configuration: the current immutable snapshot of ``config.toml`` and ``.env``.

In a tree child the snapshot is the tree's validated copy (``run/config.good.toml``, written by `geode serve`
at start and by ``geode reload`` after the full check), so saving ``config.toml`` alone changes nothing: the
snapshot changes only when the child starts and when ``geode reload`` has validated a new file. Outside a tree
(CLI commands, tests) it is the file itself. ``.env`` is read with it, and re-read only on :meth:`reload`.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from geode.config_file import last_good_path, parse_config, read_config, serving
from geode.config_schema import GeodeConfig
from geode.protocol.errors import ConfigError

if TYPE_CHECKING:
    from geode.home import GeodeHome

log = logging.getLogger("geode.config")
C = TypeVar("C", bound=GeodeConfig)


class ConfigSource(Generic[C]):
    """Holds one snapshot (``snapshot``, ``env``) and replaces it only through :meth:`reload`.

    ``build`` turns the parsed file into the typed snapshot (``GeodeConfig.from_raw`` or the shell's
    ``TreeSettings.from_raw``); it raises ``ConfigError`` on a bad value. ``tree=True`` reads the tree's
    validated copy when there is one (a child of ``geode serve``); a broken file falls back to it too.
    """

    def __init__(self, home: GeodeHome, build: Callable[[dict[str, Any]], C], *, tree: bool = False) -> None:
        self.home = home
        self._build = build
        self._tree = tree
        self._lock = threading.Lock()
        self._snapshot, self._stamp = self._read()
        self._env: Mapping[str, str] = dict(home.load_dotenv())

    @property
    def snapshot(self) -> C:
        """The current typed config (immutable: a reload replaces it, never edits it)."""
        return self._snapshot

    @property
    def env(self) -> Mapping[str, str]:
        """``$GEODE_HOME/.env`` as read at start or at the last reload (secrets: never log it)."""
        return self._env

    @property
    def stamp(self) -> str:
        """A digest of the bytes the snapshot was built from (changes when a reload brings a new file)."""
        return self._stamp

    def changed(self) -> bool:
        """Whether the source (the tree's validated copy, or the file) now differs from the snapshot."""
        try:
            return self._digest(self._source_bytes()) != self._stamp
        except ConfigError:
            return False

    def reload(self) -> C:
        """Re-read the source and ``.env``; a broken or invalid one is a ``ConfigError`` and the old snapshot
        stays. Returns the (possibly unchanged) snapshot."""
        with self._lock:
            raw, name = self._source_bytes(), self._source_name()
            try:
                built = self._build(parse_config(raw, name))
            except ConfigError as exc:  # one line naming the file, as at start
                message = exc.message or str(exc)
                raise ConfigError(message if message.startswith(name) else f"{name}: {message}") from None
            self._snapshot, self._stamp = built, self._digest(raw)
            self._env = dict(self.home.load_dotenv())
            return built

    def _read(self) -> tuple[C, str]:
        if self._tree and last_good_path(self.home).exists():
            try:
                raw = last_good_path(self.home).read_bytes()
                return self._build(parse_config(raw, last_good_path(self.home))), self._digest(raw)
            except (OSError, ConfigError) as exc:
                log.warning("config: the tree's validated copy is unusable (%s); reading the file", exc)
        try:
            raw_cfg, raw = read_config(self.home.config_file)
            return self._build(raw_cfg), self._digest(raw)
        except ConfigError:  # unreadable, not TOML or a bad value: the tree's last good copy, else refused
            return serving(self.home, self._build), self._digest(self._source_bytes())

    def _source_bytes(self) -> bytes:
        path = self._source_path()
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return b""
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None

    def _source_path(self) -> Path:
        good = last_good_path(self.home)
        return good if self._tree and good.exists() else self.home.config_file

    def _source_name(self) -> str:
        return str(self._source_path())

    @staticmethod
    def _digest(raw: bytes) -> str:
        return hashlib.sha256(raw).hexdigest()[:16]
