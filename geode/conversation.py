"""The canonical conversation: messages made of text, tool_use and tool_result blocks.

Every provider adapter projects this shape onto its wire format and parses replies back into it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class TextBlock(BaseModel):
    model_config = ConfigDict(frozen=True)
    type: Literal["text"] = "text"
    text: str


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


Block = Annotated[TextBlock | ToolUseBlock | ToolResultBlock, Field(discriminator="type")]


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
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        return [b for b in self.content if isinstance(b, ToolResultBlock)]
