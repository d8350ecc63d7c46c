"""The environment run_bash gives its shell: the executor's own, minus every secret and every GEODE_* name.

Dropped: provider and messenger keys by name, anything that looks like a credential (``*_API_KEY``,
``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``CODEX*`` ...), every name defined in ``$GEODE_HOME/.env``,
any variable whose value equals one of those ``.env`` values, every ``GEODE_*`` name (``GEODE_HOME`` too),
and ``PROMETHEUS_MULTIPROC_DIR`` (the metrics page's directory, docs/observability.md).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from geode.home import GeodeHome

log = logging.getLogger(__name__)

KNOWN_SECRETS = frozenset(
    {
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "ZAI_API_KEY",
        "OPENROUTER_API_KEY",
        "TELEGRAM_BOT_TOKEN",
        "SLACK_BOT_TOKEN",
        "SLACK_APP_TOKEN",
        "DISCORD_BOT_TOKEN",
    }
)
_SECRET_NAME = re.compile(
    r"^CODEX|^GEODE_|API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE_KEY|ACCESS_KEY|SESSION_KEY"
    r"|AUTH_KEY|_PAT$",
    re.IGNORECASE,
)
# the tree's own plumbing: a command's prometheus_client must not write into the metrics page's directory
TREE_ONLY = frozenset({"PROMETHEUS_MULTIPROC_DIR"})
MIN_SECRET_VALUE = 8  # shorter .env values ("1", "true") are not matched by value


def is_secret_name(name: str) -> bool:
    return name.upper() in KNOWN_SECRETS or bool(_SECRET_NAME.search(name))


def dotenv_of(home_root: str | os.PathLike[str] | None) -> dict[str, str]:
    """``$GEODE_HOME/.env`` as the daemon reads it; empty when there is no home or no file."""
    if not home_root:
        return {}
    try:
        return GeodeHome(Path(home_root)).load_dotenv()
    except (OSError, UnicodeDecodeError) as exc:  # unreadable: strip by name pattern only
        log.warning("run_bash: could not read the home's .env to strip its names: %s", type(exc).__name__)
        return {}


def shell_env(
    base: Mapping[str, str] | None = None,
    *,
    home_root: str | os.PathLike[str] | None = None,
    extra_names: Iterable[str] = (),
) -> dict[str, str]:
    """A copy of ``base`` (default: this process's environment) without secrets.

    ``home_root`` defaults to ``base["GEODE_HOME"]``: the names (and values) of its ``.env`` are stripped.
    """
    src = dict(os.environ if base is None else base)
    dotenv = dotenv_of(home_root if home_root is not None else src.get("GEODE_HOME"))
    names = {n.upper() for n in (*dotenv, *extra_names, *TREE_ONLY)}
    values = {v for v in dotenv.values() if len(v) >= MIN_SECRET_VALUE}
    return {
        k: v for k, v in src.items() if k.upper() not in names and not is_secret_name(k) and v not in values
    }
