"""`geode mcp`: serve GEODE's run_agent / continue_agent / get_health to MCP hosts over stdio (default) or
streamable HTTP (``--http HOST:PORT``: always behind a bearer token; on loopback one is made in the home).

``actors/cli/main.py`` dispatches here before building the typer app, and stdio answers ``initialize``
before the SDK is imported (:mod:`geode.mcp_server.handshake`): a host's cold start stays near 0.1 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

EXIT_USAGE, EXIT_CONFIG = 2, 78
EARLY_INIT_ENV = "GEODE_MCP_EARLY_INIT"  # "0": let the SDK answer initialize itself (tests compare both)
EARLY_WAIT_S = 0.2  # the SDK import waits this long at most for the first message to be answered


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="geode mcp",
        description="Serve GEODE as an MCP server (tools run_agent, continue_agent, get_health).",
    )
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="streamable HTTP on HOST:PORT (endpoint /mcp) instead of stdio, behind a bearer token: "
        "GEODE_MCP_TOKEN or [mcp.serve] token; on loopback without one, the token kept in "
        "$GEODE_HOME/keys/mcp-http.token (made and printed once on first use)",
    )
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.http is not None:
        return serve_http(args.http)
    return serve_stdio()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("geode")
    except PackageNotFoundError:
        return "0+unknown"


def _build(creator: str) -> tuple[Any, Any]:
    """The MCP server and its turn runner for ``creator`` (imports the SDK: ~0.5 s)."""
    from actors.cli.mcp_backend import ControlTurnRunner
    from geode.home import GeodeHome
    from geode.mcp_server.app import build_server

    runner = ControlTurnRunner(GeodeHome.from_env(), creator=creator)
    return build_server(runner, version=_version()), runner


# --- stdio ----------------------------------------------------------------------------------------------
def serve_stdio() -> int:
    from geode.mcp_server import handshake
    from geode.mcp_server.turns import uid_creator

    # the wire keeps private copies of fds 0 and 1; fd 0 reads /dev/null and fd 1 goes to stderr meanwhile,
    # so nothing this process (or a child it starts) prints can corrupt the protocol
    wire_in = os.fdopen(os.dup(0), "rb")
    wire_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    built: dict[str, Any] = {}
    first_seen = threading.Event()

    def load() -> None:
        # the host writes initialize as it spawns us: answer it first, uncontended for the GIL, then import
        first_seen.wait(EARLY_WAIT_S)
        try:
            built["server"], built["runner"] = _build(uid_creator(os.getuid()))
        except BaseException as exc:  # reported by the main thread
            built["error"] = exc

    loader = threading.Thread(target=load, name="mcp-sdk-import", daemon=True)
    loader.start()
    first = wire_in.readline()
    if not first:
        return 0
    answered = None
    if os.environ.get(EARLY_INIT_ENV, "1") != "0":
        answered = handshake.initialize_answer(first, version=_version())
        if answered is not None:
            handshake.send(wire_out, answered)
    first_seen.set()
    loader.join()
    if "error" in built:
        raise built["error"]
    try:
        import anyio

        anyio.run(
            _serve_stdio,
            built["server"],
            handshake.WireIn(first, wire_in),
            handshake.WireOut(wire_out, answered),
        )
    finally:
        built["runner"].close()
    return 0


async def _serve_stdio(server: Any, wire_in: Any, wire_out: Any) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server  # MCPServer.run_stdio_async, but on our streams
    async with stdio_server(stdin=anyio.wrap_file(wire_in), stdout=anyio.wrap_file(wire_out)) as (r, w):
        await lowlevel.run(r, w, lowlevel.create_initialization_options())


# --- streamable HTTP -------------------------------------------------------------------------------------
def serve_http(bind: str) -> int:
    from pydantic import ValidationError

    from geode.config_schema import GeodeConfig
    from geode.config_source import ConfigSource
    from geode.home import GeodeHome
    from geode.mcp_server.http_auth import (
        BearerAuth,
        home_token,
        is_loopback,
        parse_bind,
        refusal,
        resolve_token,
    )
    from geode.mcp_server.turns import token_creator
    from geode.protocol.errors import ConfigError, GeodeError

    try:
        host, port = parse_bind(bind)
    except ValueError as exc:
        print(f"geode mcp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    home = GeodeHome.from_env()
    try:
        source = ConfigSource(home, GeodeConfig.from_raw)  # a bad [mcp.serve] value is a ConfigError
        section = source.snapshot.mcp.serve
        token = resolve_token(os.environ, source.env, section, home)
        if token is None and is_loopback(host):  # loopback is no boundary between local users
            token = home_token(home)
    except ConfigError as exc:  # a token under 16 characters (named by its source), a loose token file
        print(f"geode mcp: {exc.message or exc}", file=sys.stderr)
        return EXIT_CONFIG
    except (GeodeError, ValidationError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"geode mcp: bad [mcp.serve] in {home.config_file}: {first}", file=sys.stderr)
        return EXIT_CONFIG
    why = refusal(host, port, token)
    if why is not None or token is None:
        print(why, file=sys.stderr)
        return EXIT_USAGE
    import uvicorn

    _log_refusals()
    server, runner = _build(token_creator(token.value))
    app: Any = BearerAuth(server.streamable_http_app(host=host), token.value)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on")
    web = uvicorn.Server(config)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/mcp"
    if token.created:  # shown this once: the operator registers it with the MCP host
        print(
            f"geode mcp: made a bearer token for HTTP clients, kept 0600 in {token.source} (shown once):\n"
            f"  {token.value}\n"
            f"  register it: claude mcp add --transport http geode {url} "
            f'--header "Authorization: Bearer {token.value}"',
            file=sys.stderr,
        )
    print(
        f"geode mcp: listening on {url} (bearer token required: {token.source})",
        file=sys.stderr,
        flush=True,
    )
    try:
        web.run()
    finally:
        runner.close()
    return 0


def _log_refusals() -> None:
    """The 401s BearerAuth logs go to stderr (uvicorn configures only its own loggers)."""
    import logging

    from geode.mcp_server.http_auth import log

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("geode mcp: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


# --- typer (listed in `geode --help`; main.py runs `geode mcp` before typer is imported) -----------------
def register(app: typer.Typer) -> None:
    import typer

    def mcp(
        http: str | None = typer.Option(
            None, "--http", metavar="HOST:PORT", help="streamable HTTP instead of stdio (with a bearer token)"
        ),
    ) -> None:
        """Serve GEODE to MCP hosts (run_agent, continue_agent, get_health): stdio, or --http HOST:PORT."""
        raise typer.Exit(main(["--http", http] if http is not None else []))

    app.command(name="mcp")(mcp)
