"""Stage: write ``answer()``'s text from the query, STM and selected memories.

``ExtractiveGenerator`` is the model-free generator: it quotes the memories, dated and oldest
first, so that the newest statement of a changed fact reads last. A model generator plugs in
through the same interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tiermem.render import render_context
from tiermem.types import SearchHit, Turn


class Generator(Protocol):
    @property
    def name(self) -> str: ...

    def generate(self, query: str, stm: Sequence[Turn], hits: Sequence[SearchHit]) -> str: ...


class ExtractiveGenerator:
    name = "extractive-v1"

    def generate(self, query: str, stm: Sequence[Turn], hits: Sequence[SearchHit]) -> str:
        if not hits:
            return "I have no memory of that."
        return "From memory (oldest first):\n" + render_context(hits)
