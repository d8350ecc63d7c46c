"""discord.py's failures as GEODE's platform errors: a long 429 → RateLimited, 5xx and network → retryable,
a refused token → not retryable, other 4xx → Rejected."""

from __future__ import annotations

import warnings
from collections.abc import Awaitable
from typing import TypeVar

import aiohttp

from geode.messengers.errors import PlatformError, RateLimited, Rejected

# discord.py's voice player imports audioop (deprecated since 3.11); GEODE uses no voice
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord

T = TypeVar("T")


async def discord_call(what: str, request: Awaitable[T]) -> T:
    """Await a discord.py call; its failures as GEODE's platform errors (``what`` names the call)."""
    try:
        return await request
    except discord.RateLimited as exc:  # a 429 longer than the client's max_ratelimit_timeout
        raise RateLimited(f"{what}: rate limited", retry_after_s=exc.retry_after) from exc
    except discord.LoginFailure as exc:
        raise PlatformError(f"{what}: the bot token was refused", retryable=False) from exc
    except discord.HTTPException as exc:
        raise mapped(what, exc) from exc
    except discord.PrivilegedIntentsRequired as exc:
        raise PlatformError(f"{what}: enable the MESSAGE_CONTENT intent", retryable=False) from exc
    except discord.ConnectionClosed as exc:
        raise PlatformError(f"{what}: gateway closed ({exc.code})", retryable=exc.code != 4004) from exc
    except (TimeoutError, OSError, aiohttp.ClientError, discord.GatewayNotFound) as exc:
        raise PlatformError(f"{what}: {type(exc).__name__}", retryable=True) from exc


def mapped(what: str, exc: discord.HTTPException) -> PlatformError:
    """An HTTP error as a platform-neutral one: 429 → RateLimited (``Retry-After``), 5xx → retryable,
    401 → not retryable (the token), other 4xx → Rejected."""
    status = exc.status
    if status == 429:
        headers = getattr(exc.response, "headers", None) or {}
        try:
            retry_after = float(headers.get("Retry-After") or 1)
        except ValueError:
            retry_after = 1.0
        return RateLimited(f"{what}: rate limited", retry_after_s=retry_after)
    if status >= 500:
        return PlatformError(f"{what}: HTTP {status}", retryable=True)
    if status == 401:
        return PlatformError(f"{what}: unauthorised (the bot token)", retryable=False)
    return Rejected(f"{what}: HTTP {status} {exc.code}: {exc.text[:200]}")
