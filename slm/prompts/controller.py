"""SLM-1, the controller: rewrite the query into a retrieval plan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Literal

from pydantic import BaseModel, Field
from tiermem.slm.base import ChatMessage
from tiermem.slm.prompts.sections import clip, render
from tiermem.slm.task import TaskSpec

VERSION = "controller-v2"  # v2: a worked example

EXAMPLE = """Input:
Recent conversation:
Sam: My sister Ana is visiting from Porto next week.

Question: when does she arrive?
Output:
{"queries": [{"text": "when does Ana, Sam's sister, arrive from Porto", "route": "mtm", \
"weight": 3}, {"text": "Ana visit Porto next week", "route": "mtm", "weight": 1}], \
"since": "", "until": "", "kinds": []}"""


class HypotheticalQuery(BaseModel):
    text: str = Field(min_length=1, max_length=160)
    route: Literal["mtm", "ltm", "both"]
    weight: int = Field(ge=1, le=3)


class ControllerOutput(BaseModel):
    queries: list[HypotheticalQuery] = Field(min_length=1, max_length=3)
    since: str = Field(max_length=10, description="YYYY-MM-DD or empty")
    until: str = Field(max_length=10, description="YYYY-MM-DD or empty")
    kinds: list[Literal["fact", "event", "preference", "plan"]] = Field(max_length=4)


SPEC = TaskSpec("controller", VERSION, ControllerOutput, max_tokens=260)


@dataclass(frozen=True, slots=True)
class ControllerInput:
    query: str
    recent_turns: Sequence[str]  # "Speaker: text", oldest first, already truncated
    today: date


def build_messages(inp: ControllerInput) -> list[ChatMessage]:
    recent = "\n".join(clip(t, 240) for t in inp.recent_turns) or "(none)"
    return render(
        role="You plan searches in a personal memory of past conversations.",
        task=(
            "Rewrite the question into 1 to 3 standalone search queries that would find the "
            "memories answering it. Replace pronouns and vague references with the names, "
            "places and things they mean in the recent conversation. Route each query: mtm "
            "for personal episodes and details of this user, ltm for general knowledge, both "
            "when unsure. Give each query a weight from 1 (minor) to 3 (main). If the question "
            'names a time ("last week", "in May"), give since/until as dates; else leave '
            "them empty. List memory kinds only if the question clearly asks for one."
        ),
        constraints=[
            "Keep the user's own words in the first query.",
            f"Today is {inp.today.isoformat()}; resolve relative dates from it.",
            "Do not answer the question.",
        ],
        output_format=(
            'JSON: {"queries": [{"text": str, "route": "mtm"|"ltm"|"both", "weight": 1-3}], '
            '"since": "YYYY-MM-DD" or "", "until": "YYYY-MM-DD" or "", "kinds": [...]}'
        ),
        example=EXAMPLE,
        input_text=f"Recent conversation:\n{recent}\n\nQuestion: {inp.query}",
    )
