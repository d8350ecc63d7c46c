"""The zygote's rehearsed request (``actors/tree/sdk_warmup.py``): one streamed Messages request through the
adapter a loop worker builds, answered in memory, so that the first request's lazy state is the zygote's and
shared (a worker's first turn copied ~1.3 MiB less of the zygote's pages in a fork; docs/benchmarks.md). It
must really go through (a rehearsal that fails at once saves nothing, silently), open no socket and leave the
process with one thread (the zygote forks right after it)."""

from __future__ import annotations

import socket
import threading
from typing import Any

import anthropic
import pytest

from actors.tree import sdk_warmup
from geode.providers import sdk_tls


def test_the_rehearsal_is_answered_in_memory_and_leaves_nothing_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert anthropic.__name__  # imported, as in the zygote
    sdk_tls.shared_context()  # the zygote's client warm-up built it before
    built, threads = sdk_tls.built_count, threading.active_count()

    def no_socket(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the rehearsal opened a socket")

    monkeypatch.setattr(socket, "create_connection", no_socket)
    assert sdk_warmup.rehearse_request(["anthropic"]) is True
    assert threading.active_count() == threads
    assert sdk_tls.built_count == built  # the process's one TLS context, no CA bundle loaded again


def test_a_rehearsal_that_fails_is_skipped_and_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sdk_warmup, "_response", lambda: b"HTTP/1.1 500 Internal Server Error\r\n\r\n")
    assert sdk_warmup.rehearse_request(["anthropic"]) is False
    assert "zygote: cannot rehearse a request" in capsys.readouterr().err


def test_no_rehearsal_without_the_anthropic_sdk() -> None:
    assert sdk_warmup.rehearse_request(["openai"]) is False
