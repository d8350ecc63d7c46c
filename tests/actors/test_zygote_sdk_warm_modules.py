"""How many modules the zygote's SDK warm-up imports (``Server._import_all`` of the provider SDKs, with its
client build and rehearsed request): the SDKs' re-export packages load lazily and anthropic's cloud-platform
clients are imported only when asked for (``sdk_lazy_types.py``), so ``import anthropic`` no longer brings in
every ``anthropic.types.beta`` module through one error-details type nor ``resources.beta`` through
``lib.foundry`` (3,886 modules, 2,258 of them ``.beta``, before; 1,538 / 569 with the hook, anthropic 2.17:
deterministic for an installed SDK). The anthropic SDK is warmed alone, as with a config that names only an
anthropic model: ``openai`` stays out of the zygote (``actors/tree/provider_sdks.py``)."""

from __future__ import annotations

import subprocess
import sys

_WARM = """
import socket, sys
from actors.tree import zygote
mine, _peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
had = len(sys.modules)
zygote.Server(mine)._import_all(zygote.sdk_modules({zygote.PROVIDERS_ENV: "anthropic"}), clients=True)
import anthropic.types.beta as beta
from geode.providers import sdk_lazy_types
print("COUNTS", len(sys.modules) - had, sum(".beta" in m for m in sys.modules), "openai" in sys.modules,
      sdk_lazy_types.is_lazy(beta))
"""


def test_the_zygotes_sdk_warm_up_leaves_the_unused_type_packages_unloaded() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _WARM], capture_output=True, text=True, timeout=180, check=True
    )
    assert "zygote: rehearsed a request" in out.stdout, out.stdout + out.stderr  # the warm-up went through
    line = next(x for x in out.stdout.splitlines() if x.startswith("COUNTS"))
    modules, beta, openai, lazy = line.split()[1:]
    assert (openai, lazy) == ("False", "True")
    assert int(modules) <= 1700, modules  # 3,886 before the hook
    assert int(beta) <= 650, beta  # 2,258 before
