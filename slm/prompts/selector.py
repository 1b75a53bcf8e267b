"""SLM-2, the selector: keep the candidates that directly support a query. It only selects."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from tiermem.slm.base import ChatMessage
from tiermem.slm.prompts.sections import clip, render
from tiermem.slm.task import TaskSpec

VERSION = "selector-v1"
MAX_CANDIDATES = 64


class SelectorOutput(BaseModel):
    supporting: list[int] = Field(max_length=MAX_CANDIDATES)


SPEC = TaskSpec("selector", VERSION, SelectorOutput, max_tokens=120)


def schema(candidates: int, keep: int) -> dict[str, Any]:
    """The output schema for this call: numbers of real candidates only, at most ``keep``."""
    return {
        "type": "object",
        "properties": {
            "supporting": {
                "type": "array",
                "items": {"type": "integer", "enum": list(range(1, candidates + 1))},
                "maxItems": keep,
            }
        },
        "required": ["supporting"],
        "additionalProperties": False,
    }


@dataclass(frozen=True, slots=True)
class SelectorInput:
    queries: Sequence[str]
    candidates: Sequence[str]  # "[date] text", in first-stage order
    keep: int


def build_messages(inp: SelectorInput) -> list[ChatMessage]:
    queries = "\n".join(f"- {q}" for q in inp.queries)
    numbered = "\n".join(f"[{i}] {clip(c, 300)}" for i, c in enumerate(inp.candidates, 1))
    return render(
        role="You check which remembered facts are evidence for a question.",
        task=(
            "Read the queries and the numbered memories. Return the numbers of the memories "
            "that directly support answering at least one query, most useful first."
        ),
        constraints=[
            f"Return at most {inp.keep} numbers, each from 1 to {len(inp.candidates)}.",
            "Only select; do not answer, rewrite or explain.",
            "Leave out memories that merely share words with a query.",
        ],
        output_format='JSON: {"supporting": [numbers]}',
        input_text=f"Queries:\n{queries}\n\nMemories:\n{numbered}",
    )
