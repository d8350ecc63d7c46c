"""System prompt assembly from declared sources (GEODE.md sections, rules files, session directives)."""

from geode.prompt.builder import build_system_prompt, system_text
from geode.prompt.sources import PromptSources

__all__ = ["PromptSources", "build_system_prompt", "system_text"]
