"""Voice notes to text: the backend ``[messengers] transcription`` names, run in the messengers child where
the voice note was downloaded (geode/messengers/inbox.py), never blocking the poller's event loop.

- ``"openai"``: the official OpenAI SDK's ``audio.transcriptions.create`` (async client) against the OpenAI
  provider's base URL and key (``OPENAI_BASE_URL`` > ``[providers.openai] base_url`` > the default;
  ``OPENAI_API_KEY`` or ``[providers.openai] api_key_env``, environment over ``$GEODE_HOME/.env``), with
  ``transcription_model`` and a timeout.
- ``"command:<argv>"``: the argv (shlex-split, no shell) run with the saved file's path appended; its stdout
  is the transcript. A timeout kills it; a non-zero exit, no output or a timeout is
  :class:`TranscriptionFailed`.

A failure is one line (:class:`TranscriptionFailed`) and never carries the key; the sender is told the voice
note could not be transcribed and no turn runs on empty text."""

from __future__ import annotations

import asyncio
import logging
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from geode.config_schema import GeodeConfig
    from geode.messengers.config import MessengersSection

log = logging.getLogger(__name__)
MAX_TRANSCRIPT = 32 * 1024  # characters kept of a transcript (a turn's text is at most 64 KiB)
_STDERR_LINE = 200


class TranscriptionFailed(Exception):
    """A voice note could not be transcribed (the backend refused, failed, timed out or said nothing)."""


class Transcriber(Protocol):
    @property
    def name(self) -> str: ...

    async def transcribe(self, path: Path, media_type: str) -> str: ...


def _clean(text: str) -> str:
    out = text.strip()[:MAX_TRANSCRIPT]
    if not out:
        raise TranscriptionFailed("the transcription is empty")
    return out


@dataclass(frozen=True)
class CommandTranscriber:
    """``argv + [path]`` run without a shell; stdout (UTF-8) is the transcript."""

    argv: tuple[str, ...]
    timeout_s: float
    name: str = "command"

    async def transcribe(self, path: Path, media_type: str) -> str:
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                str(path),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise TranscriptionFailed(f"the command {self.argv[0]!r} could not start: {exc}") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise TranscriptionFailed(
                f"the command {self.argv[0]!r} took longer than {self.timeout_s:g} s (killed)"
            ) from None
        if proc.returncode != 0:
            first = (err.decode("utf-8", "replace").strip().splitlines() or [""])[0][:_STDERR_LINE]
            raise TranscriptionFailed(
                f"the command {self.argv[0]!r} exited with status {proc.returncode}"
                + (f": {first}" if first else "")
            )
        return _clean(out.decode("utf-8", "replace"))


@dataclass(frozen=True)
class OpenAITranscriber:
    """The OpenAI audio transcription API through the official SDK (async client, no SDK retries)."""

    base_url: str
    api_key: str | None = field(repr=False)
    key_name: str
    model: str
    timeout_s: float
    name: str = "openai"

    async def transcribe(self, path: Path, media_type: str) -> str:
        if not self.api_key:
            raise TranscriptionFailed(f"no {self.key_name} for the OpenAI transcription API")
        from geode.providers import sdk_lazy_types

        sdk_lazy_types.install()  # before the SDK's first import: its unused re-export packages stay unloaded
        import openai  # only where a voice note is transcribed

        data = await asyncio.to_thread(path.read_bytes)
        try:
            async with openai.AsyncOpenAI(
                api_key=self.api_key, base_url=self.base_url, max_retries=0, timeout=self.timeout_s
            ) as client:
                result = await client.audio.transcriptions.create(
                    model=self.model, file=(path.name, data, media_type or "application/octet-stream")
                )
        except openai.APIStatusError as exc:
            raise TranscriptionFailed(f"the transcription API answered HTTP {exc.status_code}") from None
        except openai.APITimeoutError:
            raise TranscriptionFailed(
                f"the transcription API took longer than {self.timeout_s:g} s"
            ) from None
        except openai.APIError as exc:
            raise TranscriptionFailed(f"the transcription API failed: {type(exc).__name__}") from None
        text = result if isinstance(result, str) else getattr(result, "text", "")
        return _clean(str(text or ""))


def command_argv(backend: str) -> tuple[str, ...]:
    """The argv of a ``command:<argv>`` backend (shlex-split); ValueError when it names none."""
    try:
        argv = tuple(shlex.split(backend.removeprefix("command:")))
    except ValueError as exc:
        raise ValueError(f"transcription {backend!r}: the command cannot be split ({exc})") from None
    if not argv:
        raise ValueError(f"transcription {backend!r}: name a command after 'command:'")
    return argv


def transcriber_for(
    section: MessengersSection,
    *,
    environ: Mapping[str, str],
    dotenv: Mapping[str, str],
    config: GeodeConfig,
) -> Transcriber | None:
    """The backend ``section.transcription`` names (None when unset: voice notes are not enabled). The
    OpenAI backend takes the OpenAI provider's base URL and key as the providers do (docs/providers.md)."""
    backend = section.transcription
    if not backend:
        return None
    if backend.startswith("command:"):
        return CommandTranscriber(command_argv(backend), section.transcription_timeout_s)
    from geode.providers.selection import Sources
    from geode.providers.vendors import vendor

    src = Sources.load(env=environ, config=config, dotenv=dotenv)
    spec, sec = vendor("openai"), src.section("openai")
    base_url = src.env.get(spec.base_url_env or "") or sec.get("base_url") or spec.default_base_url
    key, _ = src.key("openai")
    key_name = str(sec.get("api_key_env") or spec.key_env or "OPENAI_API_KEY")
    if not key:
        log.warning(
            "voice notes: transcription = 'openai' but no %s is set; each voice note is refused", key_name
        )
    return OpenAITranscriber(
        base_url=str(base_url).rstrip("/"),
        api_key=key,
        key_name=key_name,
        model=section.transcription_model,
        timeout_s=section.transcription_timeout_s,
    )
