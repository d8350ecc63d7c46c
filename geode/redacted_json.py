"""The canonical JSON of a redacted, bounded value, without the per-string walk when redaction changes
nothing (issue 34: the store's timeline rows).

:func:`redacted_json` returns exactly ``canonical_plain_json(redact(obj, ...))``. Most payloads hold nothing
redaction would change: JSON types only, no container over ``max_items`` or deeper than ``max_depth``, no
string over ``max_str``, no key over 256 characters, no text a secret shape could match; a key naming a
secret only has its value masked, as the walk masks it. For those the text is the canonical JSON of the
value itself (with those values masked, in a copy), and the secret shapes are screened once over that
whole text instead of once per string: every shape match in a string would leave in the text what the
screen looks for (a needed substring, a gate's run of ASCII characters; none of them is a character JSON
escapes, and a non-ASCII string leaves a non-ASCII text, which the screen passes).

A text the screen cannot clear (a common need such as ``gh`` in "through", ``token`` in "tokenizer") is
searched with the regexes of the shapes it may hold, once, as one text: the JSON text itself when it holds no
backslash (no string had a character JSON escapes, so each appears in it verbatim between two quotes), else
the value's strings joined by NUL. Either way every string stands verbatim between two characters that are
neither word characters, digits nor white space, so a shape's match in a string is a match in the searched
text too (a word boundary and the digit look-behind see the same boundary; the private key's end of text is
met at the searched text's end by its any-character run; a greedy class that also takes the separator only
matches longer). No match: redaction changes nothing. Anything else takes the walk of
:func:`geode.redaction.redact`.

A map whose keys are all among the plain keys seen before (strs within ``MAX_KEY`` naming no secret, learnt
from the maps the per-key loop took, at most ``MAX_PLAIN_KEYS``) has only its values looked at: one C-level
set test instead of a type, length and secret-name test per key.
"""

from __future__ import annotations

from typing import Any

from geode.redaction import (
    _LOG_SCREEN,
    _LOG_SHAPES,
    MASK,
    _secret_key,
    canonical_plain_json,
    canonical_strict_json,
    redact,
)

MAX_KEY = 256  # redact truncates longer keys
# canonical_plain_json's text, refusing NaN and infinities (redact turns those into strings)
_ENCODE = canonical_strict_json


def redacted_json(obj: Any, *, max_str: int, max_items: int, max_depth: int) -> str:
    """``canonical_plain_json(redact(obj, max_str=..., max_items=..., max_depth=...))``, the same text."""
    text = unchanged_json(obj, max_str=max_str, max_items=max_items, max_depth=max_depth)
    if text is not None:
        return text
    return canonical_plain_json(redact(obj, max_str=max_str, max_items=max_items, max_depth=max_depth))


def unchanged_json(obj: Any, *, max_str: int, max_items: int, max_depth: int) -> str | None:
    """The canonical JSON of ``obj`` redacted, when redaction would change nothing but the values of keys
    naming a secret (replaced by the mask, as the walk replaces them); ``None`` when it might change more."""
    try:
        value = _masked(obj, 0, max_str, max_items, max_depth)
        if value is _NOT:
            return None
        text = _ENCODE(value)
    except (TypeError, ValueError, RecursionError):
        return None
    if not _LOG_SCREEN.maybe(text):
        return text
    searched = text
    if "\\" in text:  # a string had a character JSON escapes: its text is not the string's
        strings: list[str] = []
        _strings(value, strings)
        searched = "\x00".join(strings)
    for shape in _LOG_SHAPES:
        if shape.possible(searched) and shape.pattern.search(searched) is not None:
            return None  # a shape matches somewhere (maybe across strings): the walk decides
    return text


def _strings(obj: Any, out: list[str]) -> None:
    """The string values of a value ``_masked`` gave (what redaction screens, and masks), in any order."""
    if type(obj) is str:
        out.append(obj)
    elif type(obj) is dict:
        for v in obj.values():
            _strings(v, out)
    elif type(obj) is list:
        for v in obj:
            _strings(v, out)


_NOT: Any = object()  # _masked's "redact may change more than a secret-named key's value"


def _masked(obj: Any, depth: int, max_str: int, max_items: int, max_depth: int) -> Any:
    """``obj`` itself when ``redact`` leaves it as it is, its strings aside (screened in the text by the
    caller): exact JSON types, within the bounds. A key naming a secret (as ``redact`` tells it) whose value
    is not empty has its value replaced by the mask, as ``redact`` replaces it, in a copy of its map (and of
    the maps and lists holding it; the rest shared); an empty one (None, "", [], {}) is kept as ``redact``
    keeps it. ``_NOT`` for anything else (a tuple, bytes, a model, a bound crossed, a long or non-str key):
    the walk decides (issue 34: a glob's ``skipped_credential_files`` count sent every such row to it)."""
    kind = type(obj)
    if kind is str:
        return obj if len(obj) <= max_str else _NOT
    if kind is int or kind is bool or kind is float or obj is None:
        return obj  # a float that is not finite: the encoder refuses it
    if kind is not dict and kind is not list:
        return _NOT  # a tuple, bytes, a model...: redact converts it
    if depth >= max_depth or len(obj) > max_items:  # a container too deep is replaced, a long one cut
        return _NOT
    out: Any = None
    if kind is dict and _PLAIN_KEYS.issuperset(obj):
        # every key one of the strs of at most MAX_KEY characters naming no secret seen before (or a str
        # subclass equal to one: the walk writes it as that str; any other key equal to a str is refused by
        # the encoder): only the values to look at, with no per-key test (issue 34: a row's keys are a few
        # names over and over)
        for k, v in obj.items():
            vkind = type(v)
            if vkind is str:
                if len(v) > max_str:
                    return _NOT
                continue
            if vkind is int or vkind is bool or vkind is float or v is None:
                continue
            m = _masked(v, depth + 1, max_str, max_items, max_depth)
            if m is not v:
                if m is _NOT:
                    return _NOT
                if out is None:
                    out = dict(obj)
                out[k] = m
        return obj if out is None else out
    if kind is list:
        for i, v in enumerate(obj):
            if type(v) is str:
                if len(v) > max_str:
                    return _NOT
                continue
            m = _masked(v, depth + 1, max_str, max_items, max_depth)
            if m is not v:
                if m is _NOT:
                    return _NOT
                if out is None:
                    out = list(obj)
                out[i] = m
        return obj if out is None else out
    for k, v in obj.items():
        if type(k) is not str or len(k) > MAX_KEY:
            return _NOT
        vkind = type(v)
        if vkind is str and len(v) <= max_str and (not v or not _secret_key(k)):
            continue  # kept: a string within bounds under a key naming no secret, "" under any key
        if (
            _secret_key(k)
            and v is not None
            and not ((vkind is str or vkind is list or vkind is dict) and not v)
        ):
            if vkind not in _JSON_TYPES:
                return _NOT  # redact masks it too, but whether it counts as empty is its == to decide
            if out is None:
                out = dict(obj)
            out[k] = MASK  # what redact puts there, whatever the value (a count, a long string, a map)
            continue
        if vkind is str:
            return _NOT  # over max_str under a key naming no secret: redact cuts it
        m = _masked(v, depth + 1, max_str, max_items, max_depth)
        if m is not v:
            if m is _NOT:
                return _NOT
            if out is None:
                out = dict(obj)
            out[k] = m
    if len(_PLAIN_KEYS) < MAX_PLAIN_KEYS and len(obj) <= 64:  # (each key an exact str within MAX_KEY here)
        _PLAIN_KEYS.update(k for k in obj if not _secret_key(k))
    return obj if out is None else out


# keys known to be exact strs of at most MAX_KEY characters that name no secret (as ``_secret_key`` tells):
# learnt from the maps the per-key loop took, up to MAX_PLAIN_KEYS (then maps with new keys keep the loop)
MAX_PLAIN_KEYS = 2048
_PLAIN_KEYS: set[str] = set()
_JSON_TYPES = (str, int, bool, float, dict, list)
