"""The LLM judge of answer correctness for the benchmark (versioned: a change of wording is a
new version, and reports name the version they used)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field
from tiermem.slm.base import ChatMessage
from tiermem.slm.prompts.sections import render
from tiermem.slm.task import TaskSpec

VERSION = "judge-v1"


class JudgeOutput(BaseModel):
    reasoning: str = Field(max_length=300)
    verdict: Literal["CORRECT", "WRONG"]


SPEC = TaskSpec("judge", VERSION, JudgeOutput, max_tokens=160)


def build_messages(question: str, gold: str, answer: str) -> list[ChatMessage]:
    return render(
        role="You grade answers to questions about a long conversation.",
        task=(
            "Compare the generated answer with the gold answer. Say CORRECT if the generated "
            "answer states the same fact as the gold answer, even if it is worded differently, "
            "longer, or gives a date in another format; say WRONG if it misses or contradicts "
            "the gold answer."
        ),
        constraints=[
            "Judge only agreement with the gold answer, not style.",
            "Give one short sentence of reasoning before the verdict.",
        ],
        output_format='JSON: {"reasoning": str, "verdict": "CORRECT"|"WRONG"}',
        input_text=f"Question: {question}\nGold answer: {gold}\nGenerated answer: {answer}",
    )
