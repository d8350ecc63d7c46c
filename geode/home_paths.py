"""The few paths of a ``$GEODE_HOME`` that `geode ask` needs before its first message (the home, its control
socket, its instance lock, its config file and the run directory), as plain strings, without pathlib.

`geode ask` reads them to find a running tree and check its config byte for byte; pathlib (with
urllib.parse and ipaddress) was ~3 ms of its start (issue 34). ``GeodeHome`` takes its names and its run
directory from here, so both say the same (tests/cli/test_home_paths.py); everything past the first
message takes the ``GeodeHome`` (``geode.home.full_home``).
"""

from __future__ import annotations

import os

DEFAULT_HOME = "~/.geode"
CONFIG_FILE = "config.toml"
CLI_SOCKET = "cli.sock"
LOCK_FILE = "serve.lock"
RUN_DIR = "run"
IPC_PATH_MAX = 107  # zmq.IPC_PATH_MAX_LEN on Linux


def fits(run_dir: str) -> bool:
    """Whether the longest socket name under ``run_dir`` stays (with a margin) within the ipc limit."""
    return len(run_dir) + len("/messengers.sock") + len("ipc://") <= IPC_PATH_MAX - 8


def home_root(raw: str) -> str:
    """``Path(raw).expanduser().resolve()`` as a string: the user part expanded (RuntimeError when it
    cannot be, as pathlib raises), made absolute with its symbolic links resolved."""
    expanded = os.path.expanduser(raw)
    if expanded.startswith("~"):
        raise RuntimeError("Could not determine home directory.")
    return os.path.realpath(expanded)


def run_dir_of(root: str) -> str:
    """Where ipc sockets live: ``<root>/run`` when its socket paths fit the ipc limit, else
    ``$XDG_RUNTIME_DIR/geode-<uid>-<hash>`` when that directory is ours and private, else
    ``/tmp/geode-<uid>-<hash>`` (hash of the home path). Pure: ``GeodeHome.ensure_run_dir`` creates or
    verifies it."""
    candidate = os.path.join(root, RUN_DIR)
    if fits(candidate):
        return candidate
    import hashlib  # only here: `geode ask`'s home fits, and hashlib's OpenSSL load was ~2 ms of its start
    from pathlib import Path

    from geode.private_dir import is_private_dir

    name = f"geode-{os.getuid()}-{hashlib.sha256(root.encode()).hexdigest()[:12]}"
    xdg = os.environ.get("XDG_RUNTIME_DIR") or ""
    if xdg.startswith("/") and is_private_dir(Path(xdg)) and fits(os.path.join(xdg, name)):
        return os.path.join(xdg, name)
    return os.path.join("/tmp", name)


class HomePaths:
    """A home's client paths as strings (``geode.home.full_home`` makes it a ``GeodeHome``)."""

    __slots__ = ("root",)

    def __init__(self, root: str) -> None:
        self.root = root

    @classmethod
    def from_env(cls) -> HomePaths:
        """``GeodeHome.from_env()``'s home: ``$GEODE_HOME``, default ``~/.geode``."""
        return cls(home_root(os.environ.get("GEODE_HOME") or DEFAULT_HOME))

    @property
    def config_file(self) -> str:
        return os.path.join(self.root, CONFIG_FILE)

    @property
    def cli_socket(self) -> str:
        return os.path.join(self.root, CLI_SOCKET)

    @property
    def lock_file(self) -> str:
        return os.path.join(self.root, LOCK_FILE)

    @property
    def run_dir(self) -> str:
        return run_dir_of(self.root)
