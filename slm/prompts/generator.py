"""The answer generator: answer from the selected memories, briefly, citing none of the
instructions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field
from tiermem.slm.base import ChatMessage
from tiermem.slm.prompts.sections import clip, render
from tiermem.slm.task import TaskSpec

# v2: memories are the context builder's lines (a date header per session, then its turns)
VERSION = "generator-v2"


class GeneratorOutput(BaseModel):
    answer: str = Field(min_length=1, max_length=300)


SPEC = TaskSpec("generator", VERSION, GeneratorOutput, max_tokens=160)


@dataclass(frozen=True, slots=True)
class GeneratorInput:
    question: str
    recent_turns: Sequence[str]
    memories: Sequence[str]  # the built context: a date header, then that session's lines
    today: str


def build_messages(inp: GeneratorInput) -> list[ChatMessage]:
    memories = "\n".join(f"- {clip(m, 300)}" for m in inp.memories) or "(none)"
    recent = "\n".join(clip(t, 200) for t in inp.recent_turns) or "(none)"
    return render(
        role="You answer a user's question from their remembered conversations.",
        task="Answer the question in one or two short sentences using only the memories.",
        constraints=[
            "When memories disagree, the most recent one is true now.",
            "If the memories do not contain the answer, say you do not remember.",
            f"Today is {inp.today}.",
        ],
        output_format='JSON: {"answer": str}',
        input_text=(
            f"Memories (oldest first):\n{memories}\n\nRecent conversation:\n{recent}"
            f"\n\nQuestion: {inp.question}"
        ),
    )
