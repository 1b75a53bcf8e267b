"""Stage: write ``answer()``'s text from the query, STM and selected memories.

``ExtractiveGenerator`` is the model-free generator: it quotes the delivered context (dated,
oldest first), so that the newest statement of a changed fact reads last. A model generator
plugs in through the same interface. Neither answers from a context that does not bear on the
question (``supports``): then memory holds nothing about it, and the answer says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from tiermem.context import DeliveredContext
from tiermem.lexical import content_stems
from tiermem.types import Turn

NOTHING_IN_MEMORY: Final = "Memory holds nothing about that."


def supports(query: str, context: DeliveredContext, min_similarity: float = 0.35) -> bool:
    """Whether the delivered memories bear on ``query``: one of them shares a content word
    (by stem) with it, or a delivered hit's dense cosine to it is at least ``min_similarity``.
    Retrieval always returns the nearest memories, related or not; a question about a city
    the user never mentioned shares no word with any of them, and is not close to any. The
    cosine admits a question in other words ("What is my dog's name?" for "I adopted a
    greyhound called Comet": 0.375 with all-MiniLM-L6-v2, where Leo's unrelated memories
    score 0.30 for "Where am I staying in Lisbon?"). A query of stop words only is taken as
    supported by any context.

    >>> from tiermem.context import pack
    >>> supports("Where am I staying in Lisbon?", pack([], {}, 100))
    False
    """
    if not context.text:
        return False
    terms = content_stems(query)
    if not terms:
        return True
    if any(h.explanation.components.get("dense", -1.0) >= min_similarity for h in context.hits):
        return True
    turns = [t.content for t in context.source_turns.values()]
    texts = turns + list(context.notes) if turns else context.lines  # a bare pack: its lines
    return any(terms & content_stems(text) for text in texts)


class Generator(Protocol):
    @property
    def name(self) -> str: ...

    def generate(self, query: str, stm: Sequence[Turn], context: DeliveredContext) -> str: ...


class ExtractiveGenerator:
    name = "extractive-v1"

    def generate(self, query: str, stm: Sequence[Turn], context: DeliveredContext) -> str:
        if not context.text:
            return NOTHING_IN_MEMORY
        return "From memory (oldest first; the latest statement holds):\n" + context.text
