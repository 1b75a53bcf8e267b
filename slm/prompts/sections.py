"""The shared prompt layout: Role, Input, Task, Constraints, Output Format."""

from __future__ import annotations

from collections.abc import Sequence

from tiermem.slm.base import ChatMessage


def render(
    *, role: str, task: str, constraints: Sequence[str], output_format: str, input_text: str
) -> list[ChatMessage]:
    """System message: role, task, constraints, output format. User message: the input."""
    system = "\n".join(
        [
            "## Role",
            role,
            "",
            "## Task",
            task,
            "",
            "## Constraints",
            *[f"- {c}" for c in constraints],
            "",
            "## Output Format",
            output_format,
        ]
    )
    return [ChatMessage("system", system), ChatMessage("user", f"## Input\n{input_text}")]


def clip(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters at a word boundary, marking the cut."""
    if len(text) <= limit:
        return text
    return text[: limit - 1].rsplit(" ", 1)[0] + "…"
