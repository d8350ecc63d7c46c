"""Files no file tool opens wherever they are found: the daemon home's own secrets by identity (device, inode:
a hardlink elsewhere is the same file), any other GEODE home by its marker files, and the known credential
files of the daemon user's home, by identity and, where they are met, by name."""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

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


class Folder(NamedTuple):
    """What holds for every entry directly in one directory: whether it is in another home (``inside``),
    the names ``credential_name`` refuses there, and whether it is an ``.ssh`` (``id_*``, not ``*.pub``)."""

    inside: bool
    names: frozenset[str]
    ssh: bool

    def named(self, name: str) -> bool:
        """``credential_name`` of an entry ``name`` of this directory."""
        return name in self.names or (self.ssh and name.startswith("id_") and not name.endswith(".pub"))


@lru_cache(maxsize=256)
def _names_in(folder: str) -> tuple[frozenset[str], bool]:
    return _BY_NAME_ONE | frozenset(last for sec, last in _BY_NAME_TWO if sec == folder), folder == ".ssh"


def is_geode_home(d: Path | str) -> bool:
    """A GEODE home by its markers: ``keys/host.secret``; or a ``records/`` directory with ``evidence/`` (what
    every home gets on its first start) or with ``config.toml``. Not ``config.toml`` with ``.env`` alone: many
    projects have both."""
    j = os.path.join
    if os.path.isfile(j(d, "keys", "host.secret")):
        return True
    if not os.path.isdir(j(d, "records")):
        return False
    return os.path.isdir(j(d, "evidence")) or os.path.isfile(j(d, "config.toml"))


def _dirs_read(home_root: str | None, uh: str | None, codex: str | None) -> tuple[list[str], list[str]]:
    """What a scan reads: the directories it lists (every file in them is a secret) and the single files it
    looks at (``CREDENTIAL_FILES`` under the user's home, ``$CODEX_HOME/auth.json``)."""
    j = os.path.join
    listed = [] if home_root is None else [home_root, j(home_root, "keys"), j(home_root, "records")]
    single: list[str] = []
    if uh is not None:
        listed.append(j(uh, ".ssh"))
        single.extend(j(uh, rel) for rel in CREDENTIAL_FILES)
    if codex:
        single.append(j(os.path.expanduser(codex), "auth.json"))
    return listed, single


Signature = tuple[int, int, int, int] | None  # (device, inode, mtime, ctime in ns); None: missing


def _signature(d: str) -> Signature:
    try:
        st = os.stat(d)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns


def _watch_point(d: str) -> tuple[str, Signature]:
    """What tells whether ``d`` changed: ``d`` itself, or when it is plainly missing (nothing at its path, not
    even a dangling symlink), its nearest existing ancestor, where creating it or any folder on the way
    changes the mtime. Any other failure (no permission, a loop) keeps ``d`` itself, looked up per call."""
    sig = _signature(d)
    if sig is not None:
        return d, sig
    here = d
    while True:
        try:
            os.lstat(here)
        except (FileNotFoundError, NotADirectoryError):
            pass
        except (OSError, ValueError):
            return d, None
        else:
            return d, None  # a dangling symlink: its target may appear anywhere
        parent = os.path.dirname(here)
        if parent == here:
            return d, None
        found = _signature(parent)
        if found is not None:
            return parent, found
        here = parent


# A scan is trusted again only when every directory it read was last changed this long before the scan
# began: a file system stamps a change with a coarse clock, so a file created in the same tick as the
# directory's last change, just after the scan read it, would leave its mtime unchanged.
SETTLED_NS = 2_000_000_000


_MARKERS = ("keys", "records", "evidence", "config.toml")  # every name ``is_geode_home`` looks at in a folder
_unmarked: dict[str, Signature] = {}  # folder -> its signature when it held none of the markers (no home)
_UNMARKED_MAX = 4096


def _no_markers(d: str) -> bool:
    """Whether nothing (not even a dangling symlink) is at any marker's name in ``d``; False when in doubt."""
    for name in _MARKERS:
        try:
            os.lstat(os.path.join(d, name))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except (OSError, ValueError):
            return False
        return False
    return True


def home_marked(d: str) -> bool:
    """``is_geode_home(d)``, remembered across calls for a folder that holds none of the markers' names:
    while it keeps its device, inode, mtime and ctime (creating, removing or renaming any entry changes
    them) it is still no home: one ``stat`` instead of two failed lookups. Remembered only when its mtime
    is ``SETTLED_NS`` old (a marker created in the same coarse tick as its last change would leave it as it
    was); a folder holding any marker (``keys/``, whose ``host.secret`` may appear; a symlink) is asked
    anew."""
    sig = _signature(d)
    if sig is not None and _unmarked.get(d) == sig:
        return False
    found = is_geode_home(d)
    if sig is not None and not found and sig[2] < time.time_ns() - SETTLED_NS and _no_markers(d):
        if len(_unmarked) >= _UNMARKED_MAX:
            _unmarked.clear()
        _unmarked[d] = sig
    return found


@dataclass(frozen=True)
class IdentityScan:
    """The secret files' identities and what they were read from: kept across calls while every directory
    read (listed, or holding a file looked at; for a missing one its nearest existing ancestor) has the same
    device, inode, mtime and ctime, which any file created, removed or renamed in it changes (the ctime: also
    when the mtime is set back, as a copy keeping times does). A file that is a symlink is looked up afresh
    on each call (its target may be replaced where no directory here sees it)."""

    key: tuple[str | None, str | None, str | None]  # home root, user home, $CODEX_HOME
    watched: tuple[tuple[str, Signature], ...]
    ids: dict[tuple[int, int], str]
    linked: tuple[tuple[str, str], ...]  # (path, reason) of symlinked secrets, stat'ed per call
    settled: bool

    @classmethod
    def take(cls, key: tuple[str | None, str | None, str | None]) -> IdentityScan:
        home_root, uh, codex = key
        listed, single = _dirs_read(home_root, uh, codex)
        begun = time.time_ns()
        watched = dict(
            _watch_point(d) for d in dict.fromkeys((*listed, *(os.path.dirname(f) for f in single)))
        )
        ids: dict[tuple[int, int], str] = {}
        linked: list[tuple[str, str]] = []
        ssh = listed[-1] if uh is not None else None
        for d in listed:
            try:
                names = os.listdir(d)
            except OSError:
                continue
            reason = CREDENTIAL if d == ssh else GEODE_HOME
            for name in names:
                if d == ssh and not (name.startswith("id_") and not name.endswith(".pub")):
                    continue
                _identity(os.path.join(d, name), reason, ids, linked)
        for f in single:
            _identity(f, CREDENTIAL, ids, linked)
        settled = all(sig is None or sig[2] < begun - SETTLED_NS for sig in watched.values())
        return cls(key, tuple(watched.items()), ids, tuple(linked), settled)

    def still_holds(self, key: tuple[str | None, str | None, str | None]) -> bool:
        return self.settled and key == self.key and all(_signature(d) == sig for d, sig in self.watched)

    def identities(self) -> dict[tuple[int, int], str]:
        """The identities now: the kept ones plus those the symlinked secrets point to at this moment."""
        if not self.linked:
            return self.ids
        ids = dict(self.ids)
        for path, reason in self.linked:
            try:
                st = os.stat(path)
            except (OSError, ValueError):
                continue
            if stat.S_ISREG(st.st_mode):
                ids.setdefault((st.st_dev, st.st_ino), reason)
        return ids


def _identity(p: str, reason: str, into: dict[tuple[int, int], str], linked: list[tuple[str, str]]) -> None:
    try:
        st = os.lstat(p)
    except (OSError, ValueError):
        return
    if stat.S_ISLNK(st.st_mode):
        linked.append((p, reason))
        try:
            st = os.stat(p)
        except (OSError, ValueError):
            return
    if stat.S_ISREG(st.st_mode):
        into.setdefault((st.st_dev, st.st_ino), reason)


_last_scan: list[IdentityScan] = []  # the process's last scan (one slot; replaced whole, never changed)


def identities(home_root: Path | None) -> dict[tuple[int, int], str]:
    """The secret files' identities (device, inode) -> reason, as a scan now would find them; the last
    scan is reused while no directory it read has changed (``IdentityScan``). Callers must not change it."""
    key = (None if home_root is None else str(home_root), _user_home_text(), os.environ.get("CODEX_HOME"))
    kept = _last_scan[0] if _last_scan else None
    if kept is None or not kept.still_holds(key):
        kept = IdentityScan.take(key)
        _last_scan[:] = [kept]
    return kept.identities()


def _user_home_text() -> str | None:
    """``os.path.expanduser("~")`` (what Path.home() takes), None when it finds no home: ``$HOME`` read
    once (expanduser asks the environment twice), the password database only when it is not set."""
    home = os.environ.get("HOME")
    if home is None:
        home = os.path.expanduser("~")
        return None if home.startswith("~") else home
    return home.rstrip("/") or "/"


def user_home() -> Path | None:
    """The daemon user's home (``$HOME``, else the password database)."""
    home = _user_home_text()
    return None if home is None else Path(home)


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
        return cls(identities(home_root), handled)

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

    def folder(self, d: str) -> Folder:
        """What holds for every entry of the resolved directory ``d`` (asked once per directory)."""
        return Folder(self._inside(d), *_names_in(d.rpartition("/")[2]))

    def entry_verdict(self, path: str, name: str, st: os.stat_result, folder: Folder) -> str | None:
        """``verdict`` of ``path`` (absolute, as realpath gives it: no symlink), the entry ``name`` of the
        directory ``folder`` was made of (``SecretFiles.folder``), given its ``lstat``."""
        mode = st.st_mode
        if stat.S_ISREG(mode):
            why = self.ids.get((st.st_dev, st.st_ino))
            if why is not None:
                return why
        if folder.named(name):
            return CREDENTIAL
        if stat.S_ISDIR(mode):
            return GEODE_HOME if self._inside(path) else None
        return GEODE_HOME if folder.inside else None

    def in_other_home(self, d: Path | str) -> bool:
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
            found = self._homes[d] = home_marked(d)
        return found
