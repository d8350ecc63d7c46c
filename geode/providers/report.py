"""``provider_report()``: which providers are usable, from env/config, without ever showing a secret."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from geode.home import GeodeHome
from geode.providers.catalogue import DEFAULTS
from geode.providers.codex import CodexAuth, jwt_exp
from geode.providers.selection import Sources, _codex_file, resolve_settings
from geode.providers.types import ProviderError
from geode.providers.vendors import VENDORS

if TYPE_CHECKING:
    from geode.config_schema import GeodeConfig


class ProviderStatus(BaseModel):
    model_config = ConfigDict(frozen=True)
    provider: str
    usable: bool
    credential: str  # where the key comes from ("ANTHROPIC_API_KEY (env)"), or what is missing; never the key
    base_url: str
    default_model: str
    wire: str
    note: str = ""
    selected: bool = False  # the provider of the configured model (its missing key is an error)

    def line(self) -> str:
        mark = "ok " if self.usable else "-- "
        extra = f"; {self.note}" if self.note else ""
        return f"{mark}{self.provider:<10} {self.credential} · {self.base_url} · {self.default_model}{extra}"


def provider_report(
    *,
    home: GeodeHome | None = None,
    env: Mapping[str, str] | None = None,
    config: GeodeConfig | None = None,
) -> list[ProviderStatus]:
    """One status per vendor plus the selected model's; safe to print (no key material)."""
    src = Sources.load(home=home, env=env, config=config)
    out: list[ProviderStatus] = []
    selected = resolve_settings(None, sources=src)
    for name, spec in VENDORS.items():
        model = DEFAULTS.get(name, "")
        base = (
            src.env.get(spec.base_url_env or "") or src.section(name).get("base_url") or spec.default_base_url
        )
        if name == "codex":
            usable, credential, note = _codex_status(src)
        else:
            key, origin = src.key(name)
            usable = key is not None
            credential = origin if key else f"{src.section(name).get('api_key_env') or spec.key_env} not set"
            note = ""
        if selected.provider == name:
            note = (note + "; " if note else "") + f"selected ({selected.model})"
        out.append(
            ProviderStatus(
                provider=name,
                usable=usable,
                credential=credential,
                base_url=base.rstrip("/"),
                default_model=model,
                wire=spec.wire,
                note=note,
                selected=selected.provider == name,
            )
        )
    return out


def _codex_status(src: Sources) -> tuple[bool, str, str]:
    path = _codex_file(src)
    if not path.exists():
        return False, f"no Codex auth file ({path})", ""
    try:
        auth = CodexAuth(path)
    except ProviderError as err:
        return False, f"Codex auth file unusable ({err.message})", ""
    exp = jwt_exp(auth.access_token)
    note = "" if exp is None else ("token expired; will refresh" if auth.needs_refresh() else "token valid")
    return True, f"Codex auth file ({path})", note
