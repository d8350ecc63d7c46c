"""The chat's own control requests: ``cli.model`` (``/model <exact id>``: the connection's next turns use that
model, the session composed again for it, its tools projected onto the model's provider). An id that is not
one of the known ones (the provider catalogue's, the configured default, the session's own) is refused with
the list, and nothing changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from geode.control.connection import Connection
from geode.home import GeodeHome
from geode.protocol import control as c
from geode.protocol.errors import BadRequest
from geode.tools.catalogue_plans import CataloguePlans

if TYPE_CHECKING:
    from geode.sessions.factory import SessionSpec


def known_models(home: GeodeHome, current: str) -> list[str]:
    """The exact ids ``/model`` accepts: the catalogue's, the configured default (``GEODE_MODEL`` /
    ``[providers] model``) and the session's current one, sorted."""
    from geode.providers.catalogue import CATALOGUE
    from geode.sessions.settings import current_model

    return sorted({*CATALOGUE, current_model(home).model, current})


class ChatRequests:
    """``cli.model``; the state is set up by ``ControlCore.__init__``."""

    home: GeodeHome
    origin: str
    plans: CataloguePlans | None
    session_factory: Callable[..., SessionSpec]

    def _set_model(self, conn: Connection, b: c.SetModel) -> c.ModelSet:
        assert conn.spec is not None
        old = conn.spec
        known = known_models(self.home, old.model)
        if b.model not in known:
            raise BadRequest(f"unknown model {b.model!r}; known: {', '.join(known)}")
        spec = self.session_factory(
            old.mode.value,
            home=self.home,
            session_id=old.session_id,
            workspace=old.workspace,
            model_override=b.model,
            time_budget_override=old.time_budget_s,
            origin=self.origin,
            skip_permissions=old.skip_permissions,
            plan=self.plans.base() if self.plans is not None else None,
        )
        if self.plans is not None and not self.plans.from_executor:  # as the handshake: claim no plan hash
            spec = spec.model_copy(update={"plan_hash": "", "plan_generation": 0})
        spec = spec.model_copy(update={"creator": old.creator, "scope": old.scope})
        with conn.lock:
            conn.spec = spec
        return c.ModelSet(model=spec.model, provider=spec.provider)
