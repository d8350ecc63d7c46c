"""Every path the daemon uses, derived from one ``GEODE_HOME`` so two homes never interfere."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from geode import home_paths as names
from geode.home_paths import IPC_PATH_MAX
from geode.private_dir import ensure_private_dir
from geode.protocol.errors import ConfigError

if TYPE_CHECKING:
    from geode.home_paths import HomePaths


class GeodeHome:
    """The layout under ``$GEODE_HOME`` (default ``~/.geode``): immutable, equal and hashed by ``root``.

    A plain class, not a dataclass: `geode ask` imports this module, and ``dataclasses`` (with ``copy``) was
    ~1.5 ms of its start (issue 34)."""

    __slots__ = ("root",)
    root: Path

    def __init__(self, root: Path) -> None:
        object.__setattr__(self, "root", root)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: GeodeHome is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: GeodeHome is immutable")

    def __eq__(self, other: object) -> bool:
        return other.root == self.root if type(other) is GeodeHome else NotImplemented

    def __hash__(self) -> int:
        return hash((self.root,))

    def __repr__(self) -> str:
        return f"GeodeHome(root={self.root!r})"

    def __reduce__(self) -> tuple[type[GeodeHome], tuple[Path]]:
        return (GeodeHome, (self.root,))

    @classmethod
    def from_env(cls, override: str | os.PathLike[str] | None = None) -> GeodeHome:
        raw = override or os.environ.get("GEODE_HOME") or names.DEFAULT_HOME
        return cls(Path(raw).expanduser().resolve())

    def ensure(self) -> GeodeHome:
        """Create the home and its logs/records/evidence directories 0700 (tightened when loose).

        The run directory is not touched here: ``ensure_run_dir`` creates or verifies it where sockets are
        bound or connected (``geode serve`` start, ``Endpoints``), so a bad one is refused in one place.
        """
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        for d in (self.root, self.logs_dir, self.records_dir, self.evidence_dir):
            d.mkdir(exist_ok=True, mode=0o700)
            try:
                os.chmod(d, 0o700)
            except OSError:
                pass
        return self

    def ensure_run_dir(self) -> Path:
        """Create the run directory 0700, or verify an existing one (``private_dir.ensure_private_dir``): a
        symlink, someone else's or a group/world-accessible one is a one-line ConfigError, never chmodded."""
        run = self.run_dir
        if run.parent == self.root:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        ensure_private_dir(run)
        return run

    @property
    def config_file(self) -> Path:
        return self.root / names.CONFIG_FILE

    @property
    def env_file(self) -> Path:
        return self.root / ".env"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def records_dir(self) -> Path:
        return self.root / "records"

    @property
    def evidence_dir(self) -> Path:
        return self.root / "evidence"

    @property
    def rules_dir(self) -> Path:
        return self.root / "rules"

    @property
    def keys_dir(self) -> Path:
        """This host's CURVE pair (``geode keys init``): ``host.secret`` 0600, ``host.pub``; folder 0700."""
        return self.root / "keys"

    @property
    def host_secret_key(self) -> Path:
        return self.keys_dir / "host.secret"

    @property
    def host_public_key(self) -> Path:
        return self.keys_dir / "host.pub"

    @property
    def cli_socket(self) -> Path:
        return self.root / names.CLI_SOCKET

    @property
    def lock_file(self) -> Path:
        return self.root / names.LOCK_FILE

    @property
    def startup_lock(self) -> Path:
        return self.root / "cli.startup.lock"

    @property
    def run_dir(self) -> Path:
        """Where ipc sockets live: ``$GEODE_HOME/run`` when its socket paths fit the ipc limit, else
        ``$XDG_RUNTIME_DIR/geode-<uid>-<hash>`` when that directory is ours and private, else
        ``/tmp/geode-<uid>-<hash>`` (hash of the home path). Pure: ``ensure_run_dir`` creates/verifies it
        (``geode.home_paths.run_dir_of``, which `geode ask` reads without pathlib)."""
        return Path(names.run_dir_of(str(self.root)))

    def ipc_endpoint(self, name: str) -> str:
        ep = f"ipc://{self.run_dir}/{name}.sock"
        if len(ep) - len("ipc://") > IPC_PATH_MAX:
            raise ConfigError(f"ipc path for {name!r} is longer than {IPC_PATH_MAX} bytes: {ep}")
        return ep

    def load_dotenv(self) -> dict[str, str]:
        """Secrets from ``$GEODE_HOME/.env`` (KEY=VALUE lines; quotes stripped). Never logged."""
        out: dict[str, str] = {}
        try:
            text = self.env_file.read_text()
        except FileNotFoundError:
            return out
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, _, value = line.partition("=")
            key = key.strip().removeprefix("export ").strip()
            out[key] = value.strip().strip("'\"")
        return out


def full_home(home: GeodeHome | HomePaths) -> GeodeHome:
    """``home`` as a ``GeodeHome``: `geode ask`'s ``HomePaths`` past its first message, or the home itself."""
    return home if isinstance(home, GeodeHome) else GeodeHome(Path(home.root))
