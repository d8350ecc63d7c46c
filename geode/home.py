"""Every path the daemon uses, derived from one ``GEODE_HOME`` so two homes never interfere."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from geode.private_dir import ensure_private_dir, is_private_dir
from geode.protocol.errors import ConfigError

IPC_PATH_MAX = 107  # zmq.IPC_PATH_MAX_LEN on Linux


def _fits(run_dir: Path) -> bool:
    """Whether the longest socket name under ``run_dir`` stays (with a margin) within the ipc limit."""
    return len(str(run_dir)) + len("/messengers.sock") + len("ipc://") <= IPC_PATH_MAX - 8


@dataclass(frozen=True)
class GeodeHome:
    """The layout under ``$GEODE_HOME`` (default ``~/.geode``)."""

    root: Path

    @classmethod
    def from_env(cls, override: str | os.PathLike[str] | None = None) -> GeodeHome:
        raw = override or os.environ.get("GEODE_HOME") or "~/.geode"
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
        return self.root / "config.toml"

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
        return self.root / "cli.sock"

    @property
    def lock_file(self) -> Path:
        return self.root / "serve.lock"

    @property
    def startup_lock(self) -> Path:
        return self.root / "cli.startup.lock"

    @property
    def run_dir(self) -> Path:
        """Where ipc sockets live: ``$GEODE_HOME/run`` when its socket paths fit the ipc limit, else
        ``$XDG_RUNTIME_DIR/geode-<uid>-<hash>`` when that directory is ours and private, else
        ``/tmp/geode-<uid>-<hash>`` (hash of the home path). Pure: ``ensure_run_dir`` creates/verifies it."""
        candidate = self.root / "run"
        if _fits(candidate):
            return candidate
        name = f"geode-{os.getuid()}-{hashlib.sha256(str(self.root).encode()).hexdigest()[:12]}"
        xdg = os.environ.get("XDG_RUNTIME_DIR") or ""
        if xdg.startswith("/") and is_private_dir(Path(xdg)) and _fits(Path(xdg) / name):
            return Path(xdg) / name
        return Path("/tmp") / name

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
