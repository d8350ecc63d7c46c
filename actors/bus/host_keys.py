"""This host's CURVE key pair in ``keys/`` (``geode keys init``); reading a peer's public key."""

from __future__ import annotations

import os
from pathlib import Path

import zmq
from zmq.utils import z85

from geode.home import GeodeHome
from geode.private_dir import ensure_private_dir
from geode.protocol.errors import ConfigError

Z85_KEY_LEN = 40


def valid_key(text: str) -> bool:
    """A z85 CURVE public or secret key (40 characters that decode to 32 bytes)."""
    if len(text) != Z85_KEY_LEN:
        return False
    try:
        return len(z85.decode(text.encode())) == 32
    except (ValueError, KeyError):
        return False


def create(home: GeodeHome, *, force: bool = False) -> str:
    """Write a new pair (secret 0600 first, then the public key 0644); the public key. Refuses to
    overwrite an existing pair unless ``force``."""
    home.ensure()
    ensure_private_dir(home.keys_dir, "keys folder")
    if not force and (home.host_secret_key.exists() or home.host_public_key.exists()):
        raise ConfigError(f"{home.keys_dir} already holds a key pair; use --force to replace it")
    pub, sec = zmq.curve_keypair()
    _write(home.host_secret_key, sec.decode(), 0o600)
    _write(home.host_public_key, pub.decode(), 0o644)
    return pub.decode()


def _write(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def load(home: GeodeHome) -> tuple[str, str] | None:
    """(public, secret) z85 from the keys folder, None when there is no pair; a broken pair is refused."""
    if not home.host_secret_key.exists() and not home.host_public_key.exists():
        return None
    try:
        pub = home.host_public_key.read_text().strip()
        sec = home.host_secret_key.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"{home.keys_dir}: cannot read the key pair: {exc}") from exc
    if not (valid_key(pub) and valid_key(sec)):
        raise ConfigError(f"{home.keys_dir}: not a z85 CURVE key pair; run geode keys init --force")
    if zmq.curve_public(sec.encode()).decode() != pub:
        raise ConfigError(f"{home.keys_dir}: host.pub does not belong to host.secret")
    return pub, sec


def read_peer_key(value: str) -> str:
    """``--server-key``: a z85 public key, or ``@path`` to a file holding one (e.g. main's host.pub). z85's
    alphabet has ``@``: a value that is a key itself and names no file is the key (1 key in 85 starts so)."""
    text = value
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            text = path.read_text()
        except OSError as exc:
            if not (valid_key(value) and not path.exists()):
                raise ConfigError(f"cannot read the server key from {value[1:]}: {exc.strerror}") from exc
    text = text.strip()
    if not valid_key(text):
        raise ConfigError("the server key is not a z85 CURVE public key (40 characters)")
    return text
