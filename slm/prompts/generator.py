"""The answer generator: answer from the selected memories, briefly, citing none of the
instructions."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field
from tiermem.generator import NOTHING_IN_MEMORY
from tiermem.slm.base import ChatMessage
from tiermem.slm.prompts.sections import clip, render
from tiermem.slm.task import TaskSpec

# v2: memories are the context builder's lines (a date header per session, then its turns)
# v3: memories newest first; the latest statement answers, and a change is said; nothing
# relevant: the fixed refusal
VERSION = "generator-v3"


class GeneratorOutput(BaseModel):
    answer: str = Field(min_length=1, max_length=300)


SPEC = TaskSpec("generator", VERSION, GeneratorOutput, max_tokens=160)


@dataclass(frozen=True, slots=True)
class GeneratorInput:
    question: str
    recent_turns: Sequence[str]
    memories: Sequence[str]  # the built context (oldest first), shown newest first
    today: str


_HEADER = re.compile(r"^\[[^\]]+\]$")  # a date line of the context: "[9 October 2026]"


def newest_first(lines: Sequence[str]) -> list[str]:
    """The built context's lines (notes, then sessions oldest first, each under its date),
    with the sessions newest first: a small model answers from the first lines that fit the
    question, and for a changed fact those must hold the latest statement.

    >>> newest_first(["[general knowledge] x", "[1 May 2026]", "a", "[9 May 2026]", "b"])
    ['[general knowledge] x', '[9 May 2026]', 'b', '[1 May 2026]', 'a']
    """
    head: list[str] = []
    blocks: list[list[str]] = []
    for line in lines:
        if _HEADER.match(line):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
        else:
            head.append(line)
    return head + [line for block in reversed(blocks) for line in block]


def build_messages(inp: GeneratorInput) -> list[ChatMessage]:
    memories = "\n".join(f"- {clip(m, 300)}" for m in newest_first(inp.memories)) or "(none)"
    recent = "\n".join(clip(t, 200) for t in inp.recent_turns) or "(none)"
    return render(
        role="You answer a user's question from their remembered conversations.",
        task="Answer the question in one or two short sentences using only the memories.",
        constraints=[
            "Memories are grouped under their dates, newest first; a newer one replaces an "
            "older one on the same thing (a moved date, a new diet, a new job).",
            "Answer with the latest value. If the memories show it changed, also give the "
            'earlier one, in this form: "<latest>; it was <earlier> before."',
            f'If no memory is about the question, answer exactly: "{NOTHING_IN_MEMORY}"',
            f"Today is {inp.today}.",
        ],
        output_format='JSON: {"answer": str}',
        input_text=(
            f"Memories (newest first):\n{memories}\n\nRecent conversation:\n{recent}"
            f"\n\nQuestion: {inp.question}"
        ),
    )
