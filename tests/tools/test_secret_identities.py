"""Issue 34, session 6: the secret files' identities kept across calls while no directory they were read from
has changed, and the walk's per-directory shortcut. A secret file created, replaced or linked between two
calls is still refused on the second; a walk answers exactly as the full per-entry check."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

import geode.tools.secret_files as secret_files
from geode.tools.builtin.fs_guard import Skips, walk
from geode.tools.paths import AllowedRoots, Boundary, Exclusion
from geode.tools.secret_files import IdentityScan

OLD = time.time() - 3600  # an mtime long settled: the scan that reads it is kept


def _settle(*dirs: Path) -> None:
    for d in dirs:
        if d.exists():
            os.utime(d, (OLD, OLD))


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path, list[int]]:
    """A daemon home, a user home ($HOME) with an .ssh folder, a workspace; the count of scans taken."""
    home, user, ws = tmp_path / "home", tmp_path / "user", tmp_path / "ws"
    for d in (home, home / "keys", home / "records", user / ".ssh", ws):
        d.mkdir(parents=True)
    (home / ".env").write_text("KEY=v\n")
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    taken: list[int] = []
    real = IdentityScan.take.__func__  # type: ignore[attr-defined]

    def take(cls: type[IdentityScan], key: tuple[str | None, str | None, str | None]) -> IdentityScan:
        taken.append(1)
        return real(cls, key)  # type: ignore[no-any-return]

    monkeypatch.setattr(IdentityScan, "take", classmethod(take))
    return home, user, ws, taken


def _verdict(home: Path, ws: Path, p: Path) -> str | None:
    return Boundary.of(AllowedRoots((ws,), Exclusion((home,), home=home))).verdict(p)


def _settle_all(home: Path, user: Path) -> None:
    _settle(home, home / "keys", home / "records", user, user / ".ssh", user / ".aws", user / ".config")
    _settle(user / ".config" / "gh")


def test_a_settled_scan_is_kept_and_a_secret_created_after_it_is_still_refused(
    setup: tuple[Path, Path, Path, list[int]],
) -> None:
    home, user, ws, taken = setup
    _settle_all(home, user)
    assert _verdict(home, ws, ws) is None
    assert _verdict(home, ws, ws) is None
    assert len(taken) == 1  # the second call reused the first call's scan: nothing it read changed
    # each kind of place a secret can appear in, one at a time, each linked into the workspace
    places = [
        home / "keys" / "new.secret",
        home / "records" / "new.mdb",
        home / "token.json",
        user / ".ssh" / "id_new",
        user / ".aws" / "credentials",  # its folder did not exist at the first scan
        user / ".netrc",
        user / ".config" / "gh" / "hosts.yml",  # two folders down that did not exist
    ]
    for i, secret in enumerate(places):
        secret.parent.mkdir(parents=True, exist_ok=True)
        secret.write_text("s\n")
        link = ws / f"hard{i}"
        os.link(secret, link)  # a hardlink: only the identity can tell
        assert _verdict(home, ws, link) is not None, secret
        _settle_all(home, user)
        assert _verdict(home, ws, link) is not None, secret  # settled again: scanned once more, then kept
        assert _verdict(home, ws, link) is not None, secret
    assert len(taken) == 1 + 2 * len(places)  # a scan after each change and one after each settling


def test_a_secret_replaced_in_place_by_rename_is_refused_by_its_new_identity(
    setup: tuple[Path, Path, Path, list[int]],
) -> None:
    home, user, ws, _taken = setup
    _settle_all(home, user)
    assert _verdict(home, ws, ws) is None
    fresh = home / ".env.tmp"
    fresh.write_text("KEY=w\n")
    os.link(fresh, ws / "fresh")
    os.replace(fresh, home / ".env")  # the home's .env, now another inode
    assert _verdict(home, ws, ws / "fresh") == "geode_home"


def test_a_symlinked_secret_is_followed_on_every_call(
    setup: tuple[Path, Path, Path, list[int]], tmp_path: Path
) -> None:
    home, user, ws, taken = setup
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "netrc").write_text("machine a\n")
    (user / ".netrc").symlink_to(vault / "netrc")
    _settle_all(home, user)
    _settle(vault)
    assert _verdict(home, ws, ws) is None
    swapped = vault / "netrc.new"  # the target replaced where no folder the scan reads sees it
    swapped.write_text("machine b\n")
    os.link(swapped, ws / "copy")
    os.replace(swapped, vault / "netrc")
    assert _verdict(home, ws, ws / "copy") == "credential_file"
    assert len(taken) == 1  # caught without a new scan: the symlink's target is looked up per call


def test_a_credential_folder_that_is_a_dangling_symlink_is_watched_itself(
    setup: tuple[Path, Path, Path, list[int]], tmp_path: Path
) -> None:
    home, user, ws, taken = setup
    target = tmp_path / "elsewhere" / "aws"
    (user / ".aws").symlink_to(target)  # dangling: creating its target changes no folder the scan reads
    _settle_all(home, user)
    assert _verdict(home, ws, ws) is None
    assert _verdict(home, ws, ws) is None
    target.mkdir(parents=True)
    (target / "credentials").write_text("k\n")
    os.link(target / "credentials", ws / "creds")
    assert _verdict(home, ws, ws / "creds") == "credential_file"
    assert len(taken) == 2  # kept while nothing changed, scanned again once the target appeared


def test_a_scan_of_a_folder_changed_just_now_is_not_kept(setup: tuple[Path, Path, Path, list[int]]) -> None:
    home, _user, ws, taken = setup  # every folder was just made: its mtime is too recent to trust
    assert _verdict(home, ws, ws) is None
    assert _verdict(home, ws, ws) is None
    assert len(taken) == 2


def test_codex_home_is_part_of_what_the_scan_was_taken_for(
    setup: tuple[Path, Path, Path, list[int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, user, ws, _taken = setup
    codex = tmp_path / "codex"
    codex.mkdir()
    (codex / "auth.json").write_text("{}")
    os.link(codex / "auth.json", ws / "auth-copy")
    _settle_all(home, user)
    assert _verdict(home, ws, ws / "auth-copy") is None
    monkeypatch.setenv("CODEX_HOME", str(codex))
    assert _verdict(home, ws, ws / "auth-copy") == "credential_file"


def _listing(base: Path, b: Boundary) -> tuple[list[tuple[str, bool]], Skips]:
    skips = Skips()
    return [(e.text, e.is_dir) for e in walk(base, b, skips)], skips


def test_the_walks_shortcut_answers_as_the_full_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(34)
    names = [
        "a",
        "workspace",
        "records",
        "evidence",
        ".aws",
        "credentials",
        ".netrc",
        "id_x",
        ".ssh",
        "n.txt",
    ]
    refused = 0
    for trial in range(12):
        root = tmp_path / f"t{trial}"
        dirs, bases = [root], [root]  # walked from the root, and from inside each home (its files refused)
        root.mkdir()
        for i in range(30):
            parent = rng.choice(dirs)
            p = parent / rng.choice(names)
            if p.exists() or p.is_symlink():
                continue
            kind = rng.random()
            if kind < 0.45:
                p.mkdir()
                dirs.append(p)
            elif kind < 0.8:
                p.write_text(f"{i}\n")
            elif kind < 0.9:
                p.symlink_to(rng.choice(dirs))
            else:
                os.mkfifo(p)
        for rel in (".ssh/id_x", ".ssh/id_x.pub", ".aws/credentials", ".netrc", "c/.config/gh/hosts.yml"):
            named = root / "named" / rel  # credential names, by name only (their identities are unknown)
            named.parent.mkdir(parents=True, exist_ok=True)
            named.write_text("k\n")
        for k, parent in enumerate(rng.sample(dirs, 2)):  # other homes, files at their top and in a workspace
            home = parent / f"home{k}"
            for sub in ("records", "evidence", "workspace"):
                (home / sub).mkdir(parents=True)
            dirs.append(home)
            bases.append(home)
            (home / "f.txt").write_text("f\n")
            (home / "workspace" / "w.txt").write_text("w\n")
        excluded = Exclusion.carving(
            tuple(rng.sample(dirs, 2)), tuple(d / "workspace" for d in rng.sample(dirs, 3))
        )
        secret = root / "hidden.txt"
        secret.write_text("s\n")
        os.link(secret, rng.choice(dirs) / "hard")
        roots = AllowedRoots.resolved((*rng.sample(dirs, 2), root), excluded)
        b = Boundary(
            tuple(roots),
            excluded,
            secret_files.SecretFiles({(secret.stat().st_dev, secret.stat().st_ino): "geode_home"}),
        )
        for base in bases:
            fast, fast_skips = _listing(base, b)
            with monkeypatch.context() as m:
                m.setattr(Boundary, "secrets_only_below", lambda self, d: False)
                b2 = Boundary(tuple(roots), excluded, secret_files.SecretFiles(dict(b.secrets.ids)))
                full, full_skips = _listing(base, b2)
            assert fast == full, (trial, base)
            assert fast_skips == full_skips, (trial, base)
            refused += fast_skips.geode_home + fast_skips.credential_files + fast_skips.outside_roots
    assert refused  # the trees had something to refuse
