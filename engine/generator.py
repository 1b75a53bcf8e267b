"""Stage: write ``answer()``'s text from the query, STM and selected memories.

``ExtractiveGenerator`` is the model-free generator: it quotes the delivered context (dated,
oldest first), so that the newest statement of a changed fact reads last. A model generator plugs in
through the same interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tiermem.context import DeliveredContext
from tiermem.types import Turn


class Generator(Protocol):
    @property
    def name(self) -> str: ...

    def generate(self, query: str, stm: Sequence[Turn], context: DeliveredContext) -> str: ...


class ExtractiveGenerator:
    name = "extractive-v1"

    def generate(self, query: str, stm: Sequence[Turn], context: DeliveredContext) -> str:
        if not context.text:
            return "I have no memory of that."
        return "From memory (oldest first):\n" + context.text
