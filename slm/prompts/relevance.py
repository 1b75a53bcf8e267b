"""The pointwise selector: is this one memory evidence for the question? Scored, not generated.

The score is P("yes") from the model's next-token distribution after the prompt, so a small
model only has to rank two tokens. The question comes before the memory: every candidate of one
query shares the prompt up to the memory, and a backend that keeps its KV cache (llama.cpp)
evaluates that prefix once. ``tiermem.training`` renders its examples with this module, so what
the LoRA adapter learns is exactly what the selector asks.

>>> msgs = build_messages(RelevanceInput("Where did Ann move?", "Ann: We moved to Oslo."))
>>> [m.role for m in msgs]
['system', 'user']
>>> msgs[1].content.index("Where did Ann move?") < msgs[1].content.index("Oslo")
True
>>> target(True), target(False)
('yes', 'no')
"""

from __future__ import annotations

from dataclasses import dataclass

from tiermem.slm.base import ChatMessage
from tiermem.slm.prompts.sections import clip, render

VERSION = "relevance-v1"
YES = "yes"
NO = "no"
MAX_MEMORY_CHARS = 400
MAX_QUESTION_CHARS = 300


@dataclass(frozen=True, slots=True)
class RelevanceInput:
    question: str
    memory: str  # one rendered candidate, "[date] text"


def build_messages(inp: RelevanceInput) -> list[ChatMessage]:
    """System and user messages; the answer (``YES`` or ``NO``) is the assistant's first
    token. The question precedes the memory so candidates of one query share a prefix."""
    return render(
        role="You check whether a remembered line is evidence for a question.",
        task=(
            "Read the question, then the memory. Answer yes if the memory states something "
            "that helps answer the question, otherwise no."
        ),
        constraints=[
            "Answer with one word: yes or no.",
            "A memory that only shares words with the question is not evidence.",
        ],
        output_format="yes or no",
        input_text=(
            f"Question: {clip(inp.question, MAX_QUESTION_CHARS)}\n\n"
            f"Memory: {clip(inp.memory, MAX_MEMORY_CHARS)}"
        ),
    )


def target(relevant: bool) -> str:
    """The assistant's answer a training example teaches."""
    return YES if relevant else NO


__all__ = ["MAX_MEMORY_CHARS", "NO", "VERSION", "YES", "RelevanceInput", "build_messages", "target"]
