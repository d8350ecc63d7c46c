"""Reading and editing ``config.toml``: one-line errors naming file, line and byte, the daemon's last good
copy, and the checked textual edits of ``geode trust`` and ``geode mcp-servers add/remove``.

A running tree keeps serving on the last config that passed the full check (``geode serve`` at start,
``geode reload``): that copy is kept in the home's private run directory, so a child restarted while the
file is broken starts on it too. Each process logs a broken file once per distinct error. Edits keep the
rest of the file, comments included, byte for byte: the new text must parse to exactly the intended data.
"""

from __future__ import annotations

import fcntl
import logging
import os
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from geode.config_bytes import LAST_GOOD
from geode.private_dir import write_private
from geode.protocol.errors import ConfigError

if TYPE_CHECKING:
    from geode.home import GeodeHome

log = logging.getLogger("geode.config")
T = TypeVar("T")
_logged: set[str] = set()


def parse_config(raw: bytes, path: Path | str) -> dict[str, Any]:
    """``raw`` as TOML; not UTF-8 or bad syntax is a one-line ``ConfigError`` naming ``path``, line, byte."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        bad = raw[exc.start : exc.end].hex(" ")
        raise ConfigError(
            f"{path}: line {line}, byte {exc.start}: not UTF-8 (0x{bad}); save the file as UTF-8"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # its message ends "(at line L, column C)"
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def read_config(path: Path) -> tuple[dict[str, Any], bytes]:
    """The parsed file and its bytes (``({}, b"")`` when absent); a problem is a one-line ``ConfigError``."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}, b""
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_config(raw, path), raw


def last_good_path(home: GeodeHome) -> Path:
    return home.run_dir / LAST_GOOD


def remember_good(home: GeodeHome, raw: bytes) -> None:
    """Keep ``raw`` (a config the full check passed) as the one a broken file falls back to."""
    home.ensure_run_dir()
    write_private(last_good_path(home), raw)


def last_good(home: GeodeHome) -> dict[str, Any] | None:
    """The last good config of this home's tree, or None when there is none (or it cannot be read)."""
    try:
        raw = last_good_path(home).read_bytes()
        return parse_config(raw, last_good_path(home))
    except (OSError, ConfigError):
        return None


def serving(home: GeodeHome, build: Callable[[dict[str, Any]], T]) -> T:
    """``build`` of the config file as it is now; when it is broken (unreadable, not TOML, a bad value) and
    this home's tree has a last good config, ``build`` of that one, with one log line per distinct error.
    With no last good config the ``ConfigError`` is raised (``geode serve`` refuses to start)."""
    try:
        return build(read_config(home.config_file)[0])
    except ConfigError as exc:
        message = exc.message or str(exc)
        if not message.startswith(str(home.config_file)):
            message = f"{home.config_file}: {message}"
        good = last_good(home)
        if good is None:
            raise ConfigError(message) from None
        if message not in _logged:
            _logged.add(message)
            log.warning("config: %s; keeping the last good config (fix it, then geode reload)", message)
        return build(good)


def file_problem(home: GeodeHome, builder: Callable[[], Callable[[dict[str, Any]], object]]) -> str | None:
    """The saved file's first problem in one line (file, line and byte; or the key and what it must be), or
    None when it is fine. A file byte-identical to the running tree's last good copy is fine without the
    typed check (``builder()`` gives the typed build; importing it costs a CLI ~200 ms)."""
    try:
        raw, source = read_config(home.config_file)
        try:
            if source and last_good_path(home).read_bytes() == source:
                return None
        except OSError:
            pass
        builder()(raw)
    except ConfigError as exc:
        message = exc.message or str(exc)
        prefix = str(home.config_file)
        return message if message.startswith(prefix) else f"{prefix}: {message}"
    return None


# -- editing (geode trust, geode mcp-servers add/remove) --------------------------------------------------


@contextmanager
def edit_lock(config_file: Path) -> Iterator[None]:
    """Two edits of the global config at once (`geode trust`, `geode mcp-servers add`): one read-modify-write
    after the other (a lock on the home directory)."""
    config_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(config_file.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def read_for_edit(config_file: Path, purpose: str) -> tuple[str, dict[str, Any]]:
    """The file's text and its parsed data (``("", {})`` when absent); a file that cannot be read or parsed
    is a one-line ``ConfigError`` ending "fix it before ``purpose``" (nothing is edited)."""
    try:
        raw = config_file.read_bytes()
    except FileNotFoundError:
        return "", {}
    except OSError as exc:
        why = exc.strerror or exc
        raise ConfigError(f"{config_file}: cannot read: {why}; fix it before {purpose}") from None
    try:
        data = parse_config(raw, config_file)
    except ConfigError as exc:
        raise ConfigError(f"{exc.message}; cannot read it, fix it before {purpose}") from None
    return raw.decode("utf-8"), data


def write_checked(config_file: Path, new_text: str, expected: dict[str, Any], refusal: str) -> None:
    """Write ``new_text`` (atomically, keeping the file's mode) only when it parses to exactly ``expected``
    (empty tables aside); otherwise nothing is written and ``ConfigError("<file>: <refusal>")``."""
    try:
        ok = _pruned(tomllib.loads(new_text)) == _pruned(expected)
    except tomllib.TOMLDecodeError:
        ok = False
    if not ok:
        raise ConfigError(f"{config_file}: {refusal}")
    atomic_write(config_file, new_text)


def atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (synced; the file's mode kept, 0600 for a new one; no temp left)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _pruned(value: Any) -> Any:
    """Empty tables dropped (removing a file's last server also removes its implicit parent tables)."""
    if isinstance(value, dict):
        kept = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v != {}}
    return value
