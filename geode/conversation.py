"""The canonical conversation: messages made of text, image, tool_use and tool_result blocks.

Every provider adapter projects this shape onto its wire format and parses replies back into it.
An image is held by reference (a file path and its sha256), never as bytes: a checkpoint stays
small whatever the pictures weigh, and the adapter reads the file when it builds a request.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class TextBlock(BaseModel):
    model_config = ConfigDict(frozen=True)
    type: Literal["text"] = "text"
    text: str


class ImageBlock(BaseModel):
    """A picture the user sent, by reference: the file at ``path`` whose bytes hash to ``sha256``.

    Never base64 in a checkpoint. ``media_type`` is what the file is (``image/jpeg``, ``image/png``, ...);
    ``size`` is its length in bytes. A provider adapter reads and verifies the file at projection time;
    a missing or altered file becomes a short text note to the model instead.
    """

    model_config = ConfigDict(frozen=True)
    type: Literal["image"] = "image"
    media_type: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    path: str
    size: int = Field(ge=0)


class ToolUseBlock(BaseModel):
    """A tool call proposed by the model. ``id`` is the provider's call id."""

    model_config = ConfigDict(frozen=True)
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResultBlock(BaseModel):
    """The answer to one tool_use; ``content`` is the JSON text the model sees."""

    model_config = ConfigDict(frozen=True)
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


Block = Annotated[TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock, Field(discriminator="type")]


class Message(BaseModel):
    """One conversation message. ``metadata`` carries non-model data (operation ids, replay sidecars)."""

    model_config = ConfigDict(frozen=True)
    role: Literal["user", "assistant"]
    content: tuple[Block, ...]
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def user_text(cls, text: str) -> Message:
        return cls(role="user", content=(TextBlock(text=text),))

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def images(self) -> list[ImageBlock]:
        return [b for b in self.content if isinstance(b, ImageBlock)]

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        return [b for b in self.content if isinstance(b, ToolResultBlock)]
