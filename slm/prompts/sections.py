"""The shared prompt layout: Role, Input, Task, Constraints, Output Format."""

from __future__ import annotations

from collections.abc import Sequence

from tiermem.slm.base import ChatMessage


def render(
    *,
    role: str,
    task: str,
    constraints: Sequence[str],
    output_format: str,
    input_text: str,
    example: str = "",
) -> list[ChatMessage]:
    """System message: role, task, constraints, output format, and a worked example if
    given (small models follow an example better than a rule). User message: the input."""
    parts = ["## Role", role, "", "## Task", task, "", "## Constraints"]
    parts += [f"- {c}" for c in constraints]
    parts += ["", "## Output Format", output_format]
    if example:
        parts += ["", "## Example", example]
    system = "\n".join(parts)
    return [ChatMessage("system", system), ChatMessage("user", f"## Input\n{input_text}")]


def clip(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters at a word boundary, marking the cut."""
    if len(text) <= limit:
        return text
    return text[: limit - 1].rsplit(" ", 1)[0] + "…"
