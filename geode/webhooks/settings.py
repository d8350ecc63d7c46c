"""``[webhooks]`` of ``config.toml``: where the webhooks child listens, whose ``X-Forwarded-For`` it believes,
and the operator's routes (``[[webhooks.routes]]``: path, authentication scheme, the NAMES of its secrets in
``$GEODE_HOME/.env``, dedupe, the prompt and its selected fields, session, delivery, limits, tools).

A leaf: it imports only the job model's vocabulary. Every refusal is one line naming the route and the fix,
and never shows a secret: a literal ``secret``/``token`` value is replaced before validation reports it."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)

from geode.listen_address import parse_listen as parse_address
from geode.schedule.jobs import AUTOMATION_BUDGET_S, MAX_BUDGET_S, PROMPT_MAX, DeliveryTarget, parse_every

HOOK_PREFIX = "/hooks/"  # every route's path starts with it
STATUS_PREFIX = "/status/"  # GET /status/<turn_id>?token=...: reserved, never a route
AUTH_SCHEMES = ("github", "stripe", "slack", "bearer")
# headers that carry a credential or a signature: never kept with an intake, never a prompt field
AUTH_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "x-hub-signature",
        "x-hub-signature-256",
        "stripe-signature",
        "x-slack-signature",
        "x-gitlab-token",
    }
)
LITERAL_SECRET_KEYS = ("secret", "token", "secret_value", "secret_values", "tokens")
SECRETS_HINT = "secrets live in $GEODE_HOME/.env; name them in secrets = [...]"
DEFAULT_DELIVERY_HEADER = "X-GitHub-Delivery"
MAX_BODY_CAP = 512 * 1024  # the intake table stores a body in one bus frame (intake_models.MAX_BODY)
MAX_DEDUPE_WINDOW_S = 90 * 86_400
_ROUTE_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_PATH = re.compile(r"^/hooks/[A-Za-z0-9_.~\-]+(?:/[A-Za-z0-9_.~\-]+)*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_HEADER = re.compile(r"^[A-Za-z0-9\-]{1,64}$")
_FIELD = re.compile(r"^[A-Za-z0-9_\-$@]{1,64}(?:\.[A-Za-z0-9_\-$@]{1,64}){0,15}$")
_TOOL_NAME = r"^[A-Za-z0-9_.:\-]{1,128}$"
_SESSION_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$|^$"
_HIDDEN = "<a value, not shown>"

Auth = Literal["github", "stripe", "slack", "bearer"]


def _no_delivery(value: object) -> object:
    return None if value == "" else value


def _header_name(name: str) -> str:
    if not _HEADER.fullmatch(name):
        raise ValueError(f"{name!r} is not a header name (letters, digits and -)")
    return name


class RouteSpec(BaseModel):
    """One ``[[webhooks.routes]]`` entry: a path, how its sender is authenticated, and the turn it starts."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    name: str
    path: str
    auth: Auth
    secrets: list[str] = Field(min_length=1, max_length=2)  # NAMES of keys in $GEODE_HOME/.env
    tolerance_s: int = Field(default=300, ge=1, le=86_400)  # stripe/slack: the signed timestamp's window
    delivery_header: Annotated[str, AfterValidator(lambda h: h and _header_name(h))] = DEFAULT_DELIVERY_HEADER
    dedupe_window: Annotated[int | None, BeforeValidator(parse_every)] = Field(
        default=None, ge=1, le=MAX_DEDUPE_WINDOW_S
    )
    keep_headers: list[Annotated[str, AfterValidator(_header_name)]] = Field(
        default_factory=list, max_length=32
    )
    json_body: StrictBool = Field(default=True, alias="json")  # the body must be a JSON object
    prompt: str = Field(min_length=1, max_length=PROMPT_MAX)
    fields: list[str] = Field(default_factory=list, max_length=64)  # dotted paths; headers.<Name>
    body_file: StrictBool = False  # the whole body as a file in the workspace (deliveries/<id>.json)
    model: str = Field(default="", max_length=200)  # "": the configured model
    budget_s: float = Field(default=AUTOMATION_BUDGET_S, gt=0, le=MAX_BUDGET_S)
    session: Literal["new", "named"] = "new"
    session_name: str = Field(default="", pattern=_SESSION_NAME)
    deliver: Annotated[DeliveryTarget | None, BeforeValidator(_no_delivery)] = None
    rate_per_minute: int = Field(default=120, ge=0, le=1_000_000)  # per (route, client); 0: unlimited
    rate_burst: int = Field(default=20, ge=1, le=100_000)
    max_body_bytes: int = Field(default=262_144, ge=1, le=MAX_BODY_CAP)
    queue_max: int = Field(default=100, ge=1, le=100_000)  # intakes whose turn has not ended
    allowed_tools: list[Annotated[str, Field(pattern=_TOOL_NAME)]] = Field(default_factory=list)
    workspace: str = Field(default="", max_length=4096)  # "": $GEODE_HOME/workspaces/hook-<name>

    @model_validator(mode="wrap")
    @classmethod
    def _named(cls, data: Any, handler: Any) -> RouteSpec:
        """Every refusal as one line naming the route (``route 'github': ...``) and its fix."""
        name = data.get("name") if isinstance(data, Mapping) else None
        label = f"route {name!r}" if isinstance(name, str) and name else "route"
        if isinstance(data, Mapping):
            literal = [k for k in LITERAL_SECRET_KEYS if k in data]
            if literal:
                raise ValueError(f"{label}: {literal[0]} = <a value> is refused: {SECRETS_HINT}")
        try:
            route: RouteSpec = handler(data)
            route._consistent()
        except ValidationError as exc:
            raise ValueError(f"{label}: {_first(exc)}") from None
        except ValueError as exc:
            raise ValueError(f"{label}: {str(exc).removeprefix('Value error, ')}") from None
        return route

    def _consistent(self) -> None:
        if not _ROUTE_NAME.fullmatch(self.name):
            raise ValueError(f"name {self.name!r}: letters, digits, _ . - only, 1..64 characters")
        dots = any(part in (".", "..") for part in self.path.split("/"))
        if (
            not self.path.startswith(HOOK_PREFIX)
            or len(self.path) > 256
            or not _PATH.fullmatch(self.path)
            or dots
        ):
            raise ValueError(
                f"path {self.path!r}: write one under {HOOK_PREFIX} such as {HOOK_PREFIX}{self.name} "
                "(letters, digits, _ . ~ - between slashes)"
            )
        for i, var in enumerate(self.secrets):
            if not _ENV_NAME.fullmatch(var):  # the value itself was replaced by _hide_values (section)
                raise ValueError(f"secrets[{i}] is not an environment variable name: {SECRETS_HINT}")
        if len(set(self.secrets)) != len(self.secrets):
            raise ValueError("secrets names the same key twice (two names only during a rotation)")
        if self.delivery_header == "" and self.dedupe_window is None:
            raise ValueError(
                'delivery_header = "" dedupes by the body\'s sha256: set dedupe_window (e.g. "24h") too'
            )
        if self.auth != "github" and "delivery_header" not in self.model_fields_set:
            raise ValueError(
                f'auth = "{self.auth}" sends no {DEFAULT_DELIVERY_HEADER}: set delivery_header to the '
                'sender\'s delivery id header, or "" with dedupe_window = "24h"'
            )
        for h in [*self.keep_headers, self.delivery_header]:
            if h.lower() in AUTH_HEADERS:
                raise ValueError(f"{h} carries a credential: it is never kept or used as a delivery id")
        for f in self.fields:
            if not _FIELD.fullmatch(f):
                raise ValueError(f"fields: {f!r} is not a dotted path such as repository.full_name")
            head, _, rest = f.partition(".")
            if head == "headers" and (not _HEADER.fullmatch(rest) or rest.lower() in AUTH_HEADERS):
                raise ValueError(f"fields: {f!r}: name a header that carries no credential")
            if head == "headers" and rest.lower() not in {h.lower() for h in self.keep_headers}:
                raise ValueError(
                    f"fields: {f!r}: add {rest!r} to keep_headers too (the prompt is built from the stored "
                    "intake)"
                )
        if self.session == "named" and not self.session_name:
            raise ValueError('session = "named" needs session_name')
        if self.session == "new" and self.session_name:
            raise ValueError('session_name is for session = "named"; a new session per delivery has no name')
        ws = self.workspace
        if ws and ("\x00" in ws or not Path(ws).expanduser().is_absolute()):
            raise ValueError(
                f"workspace {ws!r} is not an absolute path (or leave it out for hook-{self.name})"
            )

    @property
    def dedupe_window_s(self) -> float | None:
        """The dedupe window in seconds (None: a delivery id is unique for the intake table's retention)."""
        return float(self.dedupe_window) if self.dedupe_window is not None else None

    def workspace_dir(self, workspaces: Path) -> Path:
        """Where its turns run: the one the operator set, else ``<workspaces>/hook-<name>``."""
        return Path(self.workspace).expanduser() if self.workspace else workspaces / f"hook-{self.name}"


def _first(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    where = ".".join(str(p) for p in errors[0]["loc"])
    msg = str(errors[0]["msg"]).removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where + ': ' if where else ''}{msg}{more}".replace("\n", " ")


def _hide_values(route: object) -> object:
    """A route table with any literal secret replaced before validation (an error shows its input): the
    refused ``secret = "..."`` keys, and ``secrets`` entries that are not names (a pasted value)."""
    if not isinstance(route, Mapping):
        return route
    out = {k: (_HIDDEN if k in LITERAL_SECRET_KEYS else v) for k, v in route.items()}
    names = out.get("secrets")
    if isinstance(names, list):
        out["secrets"] = [s if isinstance(s, str) and _ENV_NAME.fullmatch(s) else _HIDDEN for s in names]
    return out


class WebhooksSection(BaseModel):
    """The webhooks child's settings: on when ``listen`` is set (the daemon tree only)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    listen: str = ""  # "127.0.0.1:8787" turns the child on; "" = off
    trusted_proxies: list[str] = Field(default_factory=list)  # IPs / CIDRs whose X-Forwarded-For is believed
    routes: list[RouteSpec] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _hidden(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        out = {k: (_HIDDEN if k in LITERAL_SECRET_KEYS else v) for k, v in data.items()}
        if isinstance(out.get("routes"), list):
            out["routes"] = [_hide_values(r) for r in out["routes"]]
        return out

    @field_validator("listen")
    @classmethod
    def _listen(cls, listen: str) -> str:
        if listen:
            parse_listen(listen)
        return listen

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, proxies: list[str]) -> list[str]:
        for p in proxies:
            try:
                ipaddress.ip_network(p, strict=False)
            except ValueError:
                raise ValueError(
                    f"{p!r} is not an IP address or CIDR (e.g. 127.0.0.1 or 10.0.0.0/8)"
                ) from None
        return proxies

    @field_validator("routes")
    @classmethod
    def _unique(cls, routes: list[RouteSpec]) -> list[RouteSpec]:
        names: dict[str, int] = {}
        paths: dict[str, int] = {}
        for i, r in enumerate(routes):
            if r.name in names:
                raise ValueError(
                    f"routes[{names[r.name]}] and routes[{i}] are both named {r.name!r}: rename one"
                )
            if r.path in paths:
                raise ValueError(
                    f"route {r.name!r}: path {r.path} is already routes[{paths[r.path]}]'s: give it its own"
                )
            names[r.name], paths[r.path] = i, i
        return routes


def parse_listen(listen: str) -> tuple[str, int]:
    """``"host:port"`` (``"[::1]:8787"`` for IPv6) as ``(host, port)``; ``ValueError`` in one line."""
    return parse_address(listen, 8787)


def listen_address(section: WebhooksSection) -> tuple[str, int] | None:
    """Where the child listens, or None when ``listen`` is "" (no webhooks child)."""
    return parse_listen(section.listen) if section.listen else None
