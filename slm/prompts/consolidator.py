"""The consolidator (offline, large model): abstract de-identified memories into general
knowledge units - nodes and edges of the LTM graph, each with an action against the nearest
known knowledge."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field
from tiermem.slm.base import ChatMessage
from tiermem.slm.prompts.sections import clip, render
from tiermem.slm.task import TaskSpec

VERSION = "consolidator-v1"
MAX_NODES = 8
MAX_EDGES = 8

ActionName = Literal["insert", "merge", "update", "discard"]

EXAMPLE = """Input:
Known knowledge:
[1] hiking (Concept): walking outdoor trails for exercise

Memories:
(1) [PERSON] said: I started pottery classes last month, it calms me down.
(2) [PERSON] said: We went hiking in the mountains with the kids.
Output:
{"nodes": [{"name": "pottery", "kind": "Concept", "text": "shaping clay into objects; \
taken up as a class", "action": "insert", "anchor": 0}, {"name": "hiking", "kind": \
"Concept", "text": "walking outdoor trails, also done as a family", "action": "update", \
"anchor": 1}], "edges": [{"source": "pottery", "relation": "HasProperty", "target": \
"calming", "text": "people find pottery calming", "action": "insert"}]}"""


class NodeOut(BaseModel):
    name: str = Field(min_length=1, max_length=48)
    kind: Literal["Entity", "Concept"]
    text: str = Field(max_length=160)
    action: ActionName
    anchor: int = Field(ge=0, le=16, description="number of the known item, 0 if none")


class EdgeOut(BaseModel):
    source: str = Field(min_length=1, max_length=48)
    relation: Literal["IsA", "HasProperty", "RelatedTo", "Implies"]
    target: str = Field(min_length=1, max_length=48)
    text: str = Field(max_length=160)
    action: ActionName


class ConsolidatorOutput(BaseModel):
    nodes: list[NodeOut] = Field(max_length=MAX_NODES)
    edges: list[EdgeOut] = Field(max_length=MAX_EDGES)


SPEC = TaskSpec("consolidator", VERSION, ConsolidatorOutput, max_tokens=700)


@dataclass(frozen=True, slots=True)
class ConsolidatorInput:
    memories: Sequence[str]  # de-identified MTM texts
    anchors: Sequence[str]  # rendered nearest known knowledge, numbered from 1


def build_messages(inp: ConsolidatorInput) -> list[ChatMessage]:
    known = "\n".join(f"[{i}] {clip(a, 200)}" for i, a in enumerate(inp.anchors, 1)) or "(none)"
    memories = "\n".join(f"({i}) {clip(m, 400)}" for i, m in enumerate(inp.memories, 1))
    return render(
        role="You distil personal memories into general, anonymous knowledge.",
        task=(
            "Read the memories and extract general knowledge that would help answer future "
            "questions: things, places, activities and categories (nodes), and how they relate "
            "(edges: IsA, HasProperty, RelatedTo, Implies). For each node say what to do with "
            "it: insert (new), merge (the same as a known item; give its number as anchor), "
            "update (a known item whose text should change; give its number), or discard."
        ),
        constraints=[
            "Never name a person, and never copy a name, email, phone number, address, "
            "user id or link; [PERSON] and similar marks stand for removed identifiers.",
            "Abstract away who said it and when; keep what is generally true.",
            "Node names are short common nouns or proper names of places and things.",
            "Edges connect node names; leave out anything uncertain.",
            f"At most {MAX_NODES} nodes and {MAX_EDGES} edges.",
        ],
        output_format=(
            'JSON: {"nodes": [{"name", "kind": "Entity"|"Concept", "text", "action", '
            '"anchor"}], "edges": [{"source", "relation", "target", "text", "action"}]}'
        ),
        example=EXAMPLE,
        input_text=f"Known knowledge:\n{known}\n\nMemories:\n{memories}",
    )
