"""Image blocks at projection time: the file an :class:`~geode.conversation.ImageBlock` names is read and
checked against its sha256 when a request is built (never earlier, never kept), or replaced by a short text
note when the model takes no images or the file is missing, unreadable or altered."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path

from geode.conversation import ImageBlock
from geode.providers.catalogue import model_info

MAX_IMAGE_BYTES = 5 * 1024 * 1024  # the smallest per-image limit of the providers (Anthropic): a note beyond
# the first bytes of each media type a provider takes: anything else would fail every later request of the
# session (the picture stays in its history), so it becomes a note instead
MAGIC: dict[str, tuple[bytes, ...]] = {
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}


@dataclass(frozen=True)
class LoadedImage:
    """An image's verified bytes as base64, with the media type the provider is told."""

    media_type: str
    data: str

    @property
    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.data}"


def takes_images(model: str) -> bool:
    """True when the catalogue says ``model`` accepts image input."""
    return model_info(model).image_input


def load_image(block: ImageBlock, *, model: str) -> LoadedImage | str:
    """The block's bytes (verified), or the one-line text note the model gets instead."""
    name = Path(block.path).name or block.path
    if not takes_images(model):
        return f"[image {name} ({block.media_type}) not shown: model {model} does not take image input]"
    try:
        with open(block.path, "rb") as fh:
            raw = fh.read(MAX_IMAGE_BYTES + 1)
    except OSError as exc:
        return f"[image {name} not available: {exc.strerror or type(exc).__name__}]"
    if len(raw) > MAX_IMAGE_BYTES:
        return f"[image {name} not shown: over {MAX_IMAGE_BYTES // (1024 * 1024)} MiB]"
    magic = MAGIC.get(block.media_type)
    if (
        magic is None
        or not raw.startswith(magic)
        or (block.media_type == "image/webp" and raw[8:12] != b"WEBP")
    ):
        return f"[image {name} not shown: not a {block.media_type} file a model can take]"
    if hashlib.sha256(raw).hexdigest() != block.sha256:
        return f"[image {name} not available: the file no longer matches its sha256 (changed or corrupt)]"
    return LoadedImage(block.media_type, base64.b64encode(raw).decode("ascii"))
