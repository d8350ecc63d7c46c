"""Write docs/protocol.md from the message catalogue (run: .venv/bin/python scripts/gen_protocol_doc.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel

from geode.protocol import catalog
from geode.protocol.errors import ErrorCode

HEADER = """# GEODE message protocol

Generated from `geode/protocol/` by `scripts/gen_protocol_doc.py`; do not edit by hand.

Every message between actors is one msgpack map (`use_bin_type=True`; decoded with explicit length limits and
`strict_map_key`), at most 1 MiB, validated by pydantic at the receiving boundary:

| field | meaning |
|---|---|
| `v` | protocol version (1) |
| `id` | unique message id |
| `kind` | `request` (exactly one terminal reply is owed), `cast` (one-way), `ok`, `error` |
| `type` | dotted message type, e.g. `store.checkpoint.save` |
| `corr` | id of the request a reply answers |
| `from` | sender name and incarnation, e.g. `executor#3` |
| `session` | session id where one applies |
| `deadline` | absolute deadline (ms since the epoch) for requests |
| `body` | the typed payload (below) |
| `trace` | optional W3C `traceparent` of the sender's span (tracing on; docs/observability.md) |

**Batched frames.** On the bus, one ZeroMQ message may carry several envelopes: a msgpack array of 1 to 1,024
bins, each a packed envelope as above (an envelope's first byte is a map's, a batch's an array's). The
replies a bus thread sends while it reads a burst are batched, to one peer of the same tree (ipc/inproc,
never tcp: a peer of another release): the requests found already waiting after the first frame's work, up to
16 replies or 256 KiB, one message per peer, in order; a lone request's reply is never held
(`actors/bus/inbound.py`, `SharedSocket.release`). So are the replies other threads queue for the bus thread
(a busy handler pool's, or any while the bus thread is awake) or for a socket lock's holder, consecutive ones
to one peer (`actors/bus/reply_outbox.py`, `SharedSocket.reply`), and the replies a thread completes in a row
inside `geode.protocol.later.answering` (the store's group writer answering one commit: `HeldReplies`, sent
as the block ends, at most 16 held). A receiver splits a batch and decodes
and validates each part as a frame of its own: a malformed part gets its own `bad_request`, a malformed
batch (or a batch inside a batch) one (`geode.protocol.codec.split_batch`, `tests/actors/test_bus_batch.py`).

An `error` reply's body is `{code, message}` with one of these stable codes:

"""


def fields(model: type[BaseModel]) -> str:
    parts = []
    for name, f in model.model_fields.items():
        ann = getattr(f.annotation, "__name__", None) or str(f.annotation).replace("typing.", "")
        parts.append(f"`{f.alias or name}`: {ann}{'' if f.is_required() else ' (opt)'}")
    return "; ".join(parts) or "—"


def render() -> str:
    out = [HEADER]
    out += [f"- `{c.value}`\n" for c in ErrorCode]
    specs = catalog.load_all()
    for area in catalog.AREAS:
        rows = [s for s in specs.values() if s.area == area]
        if not rows:
            continue
        out.append(f"\n## {area}\n\n| type | body | reply | meaning |\n|---|---|---|---|\n")
        for s in sorted(rows, key=lambda s: s.type):
            reply = fields(s.reply) if s.reply else "—"
            doc = " ".join(s.doc.split())[:200].replace("|", "\\|")
            out.append(f"| `{s.type}` | {fields(s.body)} | {reply} | {doc} |\n".replace("\\n", " "))
    return "".join(out)


if __name__ == "__main__":
    target = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"
    text = render()
    if "--check" in sys.argv:
        sys.exit(0 if target.exists() and target.read_text() == text else 1)
    target.write_text(text)
    print(f"wrote {target}")
