"""Local update of the graph from consolidated knowledge units: each unit finds its anchor
(the node the model named, else the node of the same name, else the nearest node above the
merge threshold) and is merged into it, updates it, is inserted, or is discarded. Nothing
else in the graph is touched."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from tiermem.changes import Change
from tiermem.ltm.graph import KnowledgeGraph, NodeKind, Relation, edge_id
from tiermem.ltm.index import Vector


class Action(StrEnum):
    INSERT = "insert"
    MERGE = "merge"
    UPDATE = "update"
    DISCARD = "discard"


@dataclass(frozen=True, slots=True)
class NodeUnit:
    name: str
    kind: NodeKind
    text: str
    action: Action
    vector: Vector
    key: str  # provenance key of the supporting MTM entry
    anchor: str | None = None  # node id the model pointed at


@dataclass(frozen=True, slots=True)
class EdgeUnit:
    source: str  # node names
    relation: Relation
    target: str
    text: str
    action: Action
    vector: Vector
    key: str


@dataclass(slots=True)
class UpdateCounts:
    inserted: int = 0
    merged: int = 0
    updated: int = 0
    discarded: int = 0
    repeats: int = 0  # support from an entry that had already supported the item
    changes: list[Change] = field(default_factory=list)

    def add(self, other: UpdateCounts) -> None:
        self.inserted += other.inserted
        self.merged += other.merged
        self.updated += other.updated
        self.discarded += other.discarded
        self.repeats += other.repeats
        self.changes += other.changes


def find_anchor(g: KnowledgeGraph, unit: NodeUnit, merge_threshold: float) -> str | None:
    if unit.anchor is not None and g.has(unit.anchor) and unit.action is not Action.INSERT:
        return unit.anchor
    same_name = g.find_by_name(unit.name)
    if same_name is not None:
        return same_name
    nearest = g.index.search(unit.vector, 1, min_score=merge_threshold, prefix="n:")
    return nearest[0][0] if nearest else None


def _support_or_update(
    g: KnowledgeGraph, item: str, text: str, vector: Vector, unit_action: Action, key: str,
    now: datetime, counts: UpdateCounts,
) -> None:  # fmt: skip
    if g.support(item, key, now):
        counts.changes.append(Change("SUPPORT", item, None, None, g.item(item).evidence))
    else:
        counts.repeats += 1
    if unit_action is Action.UPDATE and text and text != g.data(item)["text"]:
        before = g.render(item)
        g.set_text(item, text, vector)
        counts.updated += 1
        counts.changes.append(Change("UPDATE", item, before, g.render(item), g.item(item).evidence))
    else:
        counts.merged += 1


def apply_units(
    g: KnowledgeGraph,
    nodes: Sequence[NodeUnit],
    edges: Sequence[EdgeUnit],
    now: datetime,
    merge_threshold: float,
) -> UpdateCounts:
    counts = UpdateCounts()
    by_name: dict[str, str] = {}
    for unit in nodes:
        if unit.action is Action.DISCARD:
            counts.discarded += 1
            continue
        anchor = find_anchor(g, unit, merge_threshold)
        if anchor is None:
            anchor = g.add_node(unit.name, unit.kind, unit.text, unit.vector, unit.key, now)
            counts.inserted += 1
            counts.changes.append(Change("INSERT", anchor, None, g.render(anchor), 1))
        else:
            _support_or_update(
                g, anchor, unit.text, unit.vector, unit.action, unit.key, now, counts
            )
        by_name[unit.name.lower()] = anchor
    for e in edges:
        source = by_name.get(e.source.lower()) or g.find_by_name(e.source)
        target = by_name.get(e.target.lower()) or g.find_by_name(e.target)
        if e.action is Action.DISCARD or source is None or target is None or source == target:
            counts.discarded += 1
            continue
        eid = edge_id(source, e.relation, target)
        if g.has(eid):
            _support_or_update(g, eid, e.text, e.vector, e.action, e.key, now, counts)
        else:
            g.add_edge(source, e.relation, target, e.text, e.vector, e.key, now)
            counts.inserted += 1
            counts.changes.append(Change("INSERT", eid, None, g.render(eid), 1))
    return counts
