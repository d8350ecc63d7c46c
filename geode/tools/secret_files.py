"""Files no file tool opens wherever they are found: the daemon home's own secrets by identity (device, inode:
a hardlink elsewhere is the same file), any other GEODE home by its marker files, and the known credential
files of the daemon user's home, by identity and, where they are met, by name."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

GEODE_HOME = "geode_home"
# a home's folders sessions work in: ``workspace/`` (no cwd) and ``workspaces/`` (a scheduled job's, per job)
HOME_WORKSPACES = ("workspace", "workspaces")
CREDENTIAL = "credential_file"

# The known credential files, relative to a user's home. Those of the daemon user's home are refused by
# identity; any file whose path ends like one of these is refused by name (``~/.ssh/id_*`` keys below).
CREDENTIAL_FILES: tuple[str, ...] = (
    ".codex/auth.json",
    ".claude/.credentials.json",
    ".aws/credentials",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".config/gh/hosts.yml",
    ".docker/config.json",
    ".kube/config",
    ".azure/accessTokens.json",
    ".config/gcloud/credentials.db",
    ".config/gcloud/access_tokens.db",
    ".config/gcloud/application_default_credentials.json",
)
# refused by name wherever they are met (a project's own .npmrc is ordinary configuration: identity only)
_BY_NAME = tuple(tuple(p.split("/")[-2:]) if "/" in p else (p,) for p in CREDENTIAL_FILES if p != ".npmrc")


_BY_NAME_ONE = frozenset(s[0] for s in _BY_NAME if len(s) == 1)
_BY_NAME_TWO = frozenset(s for s in _BY_NAME if len(s) == 2)


def credential_name(path: Path | str) -> bool:
    """Whether ``path`` is named like a credential file (``.aws/credentials``, ``.ssh/id_ed25519`` ...)."""
    *rest, last = str(path).rsplit("/", 2)  # its last two components are all a name rule looks at
    second = rest[-1] if len(rest) == 2 else ""  # "/.netrc": nothing above the name but the root
    if second == ".ssh" and last.startswith("id_"):
        return not last.endswith(".pub")
    return last in _BY_NAME_ONE or (second, last) in _BY_NAME_TWO


def is_geode_home(d: Path) -> bool:
    """A GEODE home by its markers: ``keys/host.secret``; or a ``records/`` directory with ``evidence/`` (what
    every home gets on its first start) or with ``config.toml``. Not ``config.toml`` with ``.env`` alone: many
    projects have both."""
    j = os.path.join
    if os.path.isfile(j(d, "keys", "host.secret")):
        return True
    if not os.path.isdir(j(d, "records")):
        return False
    return os.path.isdir(j(d, "evidence")) or os.path.isfile(j(d, "config.toml"))


def _files(d: str) -> Iterator[str]:
    try:
        names = os.listdir(d)
    except OSError:
        return
    for name in names:
        yield os.path.join(d, name)


def _home_secrets(root: Path) -> Iterator[str]:
    """The daemon home's own files: every file at its top (``.env``, ``config.toml``, tokens), ``keys/*``,
    ``records/*``."""
    top = str(root)
    yield from _files(top)
    yield from _files(os.path.join(top, "keys"))
    yield from _files(os.path.join(top, "records"))


def _user_credentials(user_home: Path) -> Iterator[str]:
    home = str(user_home)
    for rel in CREDENTIAL_FILES:
        yield os.path.join(home, rel)
    for p in _files(os.path.join(home, ".ssh")):
        name = os.path.basename(p)
        if name.startswith("id_") and not name.endswith(".pub"):
            yield p
    codex = os.environ.get("CODEX_HOME")
    if codex:
        yield os.path.join(os.path.expanduser(codex), "auth.json")


def _identities(paths: Iterator[str], reason: str, into: dict[tuple[int, int], str]) -> None:
    for p in paths:
        try:
            st = os.stat(p)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            into.setdefault((st.st_dev, st.st_ino), reason)


def user_home() -> Path | None:
    """The daemon user's home (``$HOME``, else the password database)."""
    try:
        return Path.home()
    except (RuntimeError, KeyError):
        return None


@dataclass
class SecretFiles:
    """One call's view of the secret files: identities taken when it was made (a file created later is
    still refused by name or by its home's markers), GEODE homes found on the way cached per directory
    (as is what they decide for a directory: a walk asks once per directory, not once per entry).
    ``handled``: the homes the path exclusion already decides (the daemon's own, whose ``workspace/`` stays
    usable)."""

    ids: dict[tuple[int, int], str]
    handled: tuple[Path, ...] = ()
    _homes: dict[str, bool] = field(default_factory=dict)
    _below: dict[str, bool] = field(default_factory=dict)  # directory -> under another home (strictly)

    def __post_init__(self) -> None:
        self._handled = frozenset(str(h) for h in self.handled)

    @classmethod
    def scan(cls, home_root: Path | None, handled: tuple[Path, ...] = ()) -> SecretFiles:
        ids: dict[tuple[int, int], str] = {}
        if home_root is not None:
            _identities(_home_secrets(home_root), GEODE_HOME, ids)
        uh = user_home()
        if uh is not None:
            _identities(_user_credentials(uh), CREDENTIAL, ids)
        return cls(ids, handled)

    def verdict(self, real: Path | str, st: os.stat_result | None = None) -> str | None:
        """None, or why the resolved ``real`` may not be touched (``geode_home`` | ``credential_file``)."""
        if st is None:
            try:
                st = os.stat(real)
            except (OSError, ValueError):
                st = None
        if st is not None and stat.S_ISREG(st.st_mode):
            why = self.ids.get((st.st_dev, st.st_ino))
            if why is not None:
                return why
        s = str(real)
        if credential_name(s):
            return CREDENTIAL
        is_dir = st is not None and stat.S_ISDIR(st.st_mode)
        return GEODE_HOME if self._inside(s if is_dir else os.path.dirname(s)) else None

    def in_other_home(self, d: Path) -> bool:
        """Whether directory ``d`` is, or lies inside, a GEODE home not in ``handled`` (outside its
        ``workspace/`` and ``workspaces/``)."""
        return self._inside(str(d))

    def _inside(self, d: str) -> bool:
        if not d.startswith("/") or d.startswith("//"):  # not what realpath gives: the plain walk up
            return self._inside_by_parts(Path(d))
        return self._own_home(d) or self._below_home(d)

    def _own_home(self, d: str) -> bool:
        return d not in self._handled and self._home(d)

    def _below_home(self, d: str) -> bool:
        """Whether a strict ancestor of the absolute ``d`` is another home, ``d`` not under its workspaces:
        below(d) = (home(parent) and d's step down is no workspace) or below(parent), memoised per
        directory, worked out from the top down (no recursion: a path may have 2,000 components)."""
        found = self._below.get(d)
        if found is not None:
            return found
        chain: list[tuple[str, str, str]] = []  # d and its ancestors not yet known, nearest first
        here = d
        while (known := self._below.get(here)) is None:
            parent, _, name = here.rpartition("/")
            parent = parent or "/"
            if parent == here:  # the root: nothing above it
                known = self._below[here] = False
                break
            chain.append((here, parent, name))
            here = parent
        below = bool(known)
        for here, parent, name in reversed(chain):
            below = below or (self._own_home(parent) and name not in HOME_WORKSPACES)
            self._below[here] = below
        return below

    def _inside_by_parts(self, d: Path) -> bool:
        child: Path | None = None
        for here in (d, *d.parents):
            if str(here) not in self._handled and self._home(str(here)):
                if child is None or child.name not in HOME_WORKSPACES:
                    return True
            child = here
        return False

    def _home(self, d: str) -> bool:
        found = self._homes.get(d)
        if found is None:
            found = self._homes[d] = is_geode_home(Path(d))
        return found
