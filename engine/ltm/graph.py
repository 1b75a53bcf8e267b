"""The knowledge graph: ``Entity``/``Concept`` nodes and ``IsA``/``HasProperty``/``RelatedTo``/
``Implies`` edges on a networkx ``MultiDiGraph`` (one edge per relation between two nodes).

Every node and edge carries a short text, an embedding, first/last-supported times and its
provenance: the set of opaque keys of the MTM entries that support it. The evidence count is
the size of that set, so the same entry consolidated twice does not count twice, and erasing a
user removes exactly their support.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import networkx as nx
import numpy as np
from tiermem.ltm.decay import Confidence, confidence
from tiermem.ltm.index import Vector, VectorIndex, normalized


class NodeKind(StrEnum):
    ENTITY = "Entity"  # a concrete object, place or named project
    CONCEPT = "Concept"  # an abstract category


class Relation(StrEnum):
    IS_A = "IsA"
    HAS_PROPERTY = "HasProperty"
    RELATED_TO = "RelatedTo"
    IMPLIES = "Implies"


RELATION_WORDS = {
    Relation.IS_A: "is a",
    Relation.HAS_PROPERTY: "has the property",
    Relation.RELATED_TO: "is related to",
    Relation.IMPLIES: "implies",
}


@dataclass(frozen=True, slots=True)
class Item:
    """A node or an edge as the rest of the engine sees it."""

    id: str
    text: str  # rendered as a short fact
    kind: str  # a node's NodeKind or an edge's Relation
    evidence: int
    first_supported: datetime
    last_supported: datetime


@dataclass(frozen=True, slots=True)
class DecayPolicy:
    gain: float = 0.5
    half_life_days: float = 60.0
    prune_below: float = 0.1


def normalize_name(name: str) -> str:
    return " ".join(name.lower().split())


def node_id(name: str) -> str:
    """Nodes are identified by their normalised name."""
    return "n:" + hashlib.blake2b(normalize_name(name).encode(), digest_size=8).hexdigest()


def edge_id(source: str, relation: Relation, target: str) -> str:
    return f"e:{source[2:]}:{relation.value}:{target[2:]}"


class KnowledgeGraph:
    """The graph and its index. Not thread-safe: ``LongTermMemory`` serialises access."""

    def __init__(self, dim: int) -> None:
        self.graph: nx.MultiDiGraph[str] = nx.MultiDiGraph()
        self.index = VectorIndex(dim)
        self._edges: dict[str, tuple[str, str, str]] = {}  # edge id -> (u, v, key)

    # -- reading ----------------------------------------------------------------------------
    @property
    def node_count(self) -> int:
        return int(self.graph.number_of_nodes())

    @property
    def edge_count(self) -> int:
        return int(self.graph.number_of_edges())

    def has(self, item_id: str) -> bool:
        return item_id in self.graph if item_id.startswith("n:") else item_id in self._edges

    def data(self, item_id: str) -> dict[str, Any]:
        if item_id.startswith("n:"):
            node: dict[str, Any] = self.graph.nodes[item_id]
            return node
        u, v, key = self._edges[item_id]
        edge: dict[str, Any] = self.graph.edges[u, v, key]
        return edge

    def item(self, item_id: str) -> Item:
        d = self.data(item_id)
        return Item(
            item_id,
            self.render(item_id),
            str(d["kind"]) if item_id.startswith("n:") else self._edges[item_id][2],
            len(d["provenance"]),
            d["first"],
            d["last"],
        )

    def render(self, item_id: str) -> str:
        """A node as "name (Kind): text"; an edge as "source relation target: text"."""
        d = self.data(item_id)
        if item_id.startswith("n:"):
            return f"{d['name']} ({d['kind']}): {d['text']}"
        u, v, key = self._edges[item_id]
        names = self.graph.nodes[u]["name"], self.graph.nodes[v]["name"]
        triple = f"{names[0]} {RELATION_WORDS[Relation(key)]} {names[1]}"
        return f"{triple}: {d['text']}" if d["text"] else triple

    def find_by_name(self, name: str) -> str | None:
        nid = node_id(name)
        return nid if nid in self.graph else None

    def confidence(self, item_id: str, now: datetime, policy: DecayPolicy) -> Confidence:
        d = self.data(item_id)
        return confidence(
            len(d["provenance"]),
            d["last"],
            now,
            gain=policy.gain,
            half_life_days=policy.half_life_days,
        )

    def neighbourhood(self, node: str, hops: int) -> list[tuple[str, int]]:
        """Edges within ``hops`` of ``node`` (either direction), with their hop distance."""
        seen_nodes = {node: 0}
        frontier = [node]
        found: dict[str, int] = {}
        for hop in range(1, hops + 1):
            nxt = []
            for n in frontier:
                incident = list(self.graph.out_edges(n, keys=True)) + list(
                    self.graph.in_edges(n, keys=True)
                )
                for u, v, key in incident:
                    eid = edge_id(u, Relation(key), v)
                    found.setdefault(eid, hop)
                    for other in (u, v):
                        if other not in seen_nodes:
                            seen_nodes[other] = hop
                            nxt.append(other)
            frontier = nxt
        return sorted(found.items(), key=lambda x: (x[1], x[0]))

    def items(self) -> Iterator[str]:
        yield from self.graph.nodes
        yield from self._edges

    # -- writing ----------------------------------------------------------------------------
    def add_node(
        self, name: str, kind: NodeKind, text: str, vector: Vector, key: str, now: datetime
    ) -> str:
        nid = node_id(name)
        attrs = _attributes(text, vector, {key}, now, now)
        self.graph.add_node(nid, name=" ".join(name.split()), kind=kind.value, **attrs)
        self.index.upsert(nid, vector)
        return nid

    def add_edge(
        self,
        source: str,
        relation: Relation,
        target: str,
        text: str,
        vector: Vector,
        key: str,
        now: datetime,
    ) -> str:
        eid = edge_id(source, relation, target)
        attrs = _attributes(text, vector, {key}, now, now)
        self.graph.add_edge(source, target, key=relation.value, **attrs)
        self._edges[eid] = (source, target, relation.value)
        self.index.upsert(eid, vector)
        return eid

    def support(self, item_id: str, key: str, now: datetime) -> bool:
        """Add one supporting entry; ``True`` if it is new evidence (not a repeat)."""
        d = self.data(item_id)
        d["last"] = max(d["last"], now)
        if key in d["provenance"]:
            return False
        d["provenance"].add(key)
        return True

    def set_text(self, item_id: str, text: str, vector: Vector) -> None:
        d = self.data(item_id)
        d["text"] = text
        d["vec"] = normalized(vector)
        self.index.upsert(item_id, vector)

    def remove(self, item_id: str) -> list[str]:
        """Remove a node (with its edges) or an edge; the ids removed."""
        removed = []
        if item_id.startswith("e:"):
            u, v, key = self._edges.pop(item_id)
            self.graph.remove_edge(u, v, key=key)
            self.index.remove(item_id)
            return [item_id]
        for u, v, key in list(self.graph.out_edges(item_id, keys=True)) + list(
            self.graph.in_edges(item_id, keys=True)
        ):
            eid = edge_id(u, Relation(key), v)
            if eid in self._edges:
                removed += self.remove(eid)
        self.graph.remove_node(item_id)
        self.index.remove(item_id)
        return [*removed, item_id]

    def removal(self, item_id: str) -> list[tuple[str, str]]:
        """Remove an item (a node with its edges); (id, rendered text) of everything removed."""
        doomed = [item_id]
        if item_id.startswith("n:"):
            incident = list(self.graph.out_edges(item_id, keys=True)) + list(
                self.graph.in_edges(item_id, keys=True)
            )
            doomed = [edge_id(u, Relation(k), v) for u, v, k in incident] + doomed
        texts = [(i, self.render(i)) for i in dict.fromkeys(doomed) if self.has(i)]
        self.remove(item_id)
        return texts

    def withdraw(self, keys: set[str]) -> tuple[list[tuple[str, str]], list[tuple[str, int]]]:
        """Remove these provenance keys everywhere. Items left without support are removed.
        Returns (removed: id and text, decremented: id and the evidence left)."""
        removed: list[tuple[str, str]] = []
        decremented: list[tuple[str, int]] = []
        for item_id in list(self.items()):
            if not self.has(item_id):  # went with a removed node
                continue
            provenance: set[str] = self.data(item_id)["provenance"]
            if provenance & keys:
                provenance -= keys
                if provenance:
                    decremented.append((item_id, len(provenance)))
                else:
                    removed += self.removal(item_id)
        return removed, decremented

    def prune(self, now: datetime, policy: DecayPolicy) -> list[tuple[str, str]]:
        """Remove what has decayed below ``policy.prune_below``, edges first, then nodes;
        (id, rendered text) of everything removed."""
        removed: list[tuple[str, str]] = []
        for item_id in sorted(self.items(), key=lambda i: (i.startswith("n:"), i)):
            if self.has(item_id) and self.confidence(item_id, now, policy).value < (
                policy.prune_below
            ):
                removed += self.removal(item_id)
        return removed

    # -- (de)serialisation --------------------------------------------------------------------
    def to_records(self) -> dict[str, list[dict[str, Any]]]:
        def common(d: dict[str, Any]) -> dict[str, Any]:
            return {
                "text": d["text"],
                "vec": encode_vector(d["vec"]),
                "provenance": sorted(d["provenance"]),
                "first": d["first"].isoformat(),
                "last": d["last"].isoformat(),
            }

        nodes = [
            {"id": n, "name": d["name"], "kind": d["kind"], **common(d)}
            for n, d in sorted(self.graph.nodes(data=True))
        ]
        edges = [
            {"source": u, "target": v, "relation": k, **common(d)}
            for u, v, k, d in sorted(self.graph.edges(keys=True, data=True), key=lambda e: e[:3])
        ]
        return {"nodes": nodes, "edges": edges}

    @classmethod
    def from_records(cls, dim: int, records: dict[str, Iterable[dict[str, Any]]]) -> KnowledgeGraph:
        g = cls(dim)
        for r in records["nodes"]:
            g.graph.add_node(r["id"], name=r["name"], kind=r["kind"], **_stored(r))
            g.index.upsert(r["id"], g.graph.nodes[r["id"]]["vec"])
        for r in records["edges"]:
            relation = Relation(r["relation"])
            g.graph.add_edge(r["source"], r["target"], key=relation.value, **_stored(r))
            eid = edge_id(r["source"], relation, r["target"])
            g._edges[eid] = (r["source"], r["target"], relation.value)
            g.index.upsert(eid, g.graph.edges[r["source"], r["target"], relation.value]["vec"])
        return g


def _attributes(
    text: str, vector: Vector, provenance: set[str], first: datetime, last: datetime
) -> dict[str, Any]:
    """What every node and edge carries."""
    return {
        "text": text,
        "vec": normalized(vector),
        "provenance": provenance,
        "first": first,
        "last": last,
    }


def _stored(r: dict[str, Any]) -> dict[str, Any]:
    return _attributes(
        r["text"],
        _vector(r["vec"]),
        set(r["provenance"]),
        datetime.fromisoformat(r["first"]),
        datetime.fromisoformat(r["last"]),
    )


def encode_vector(vector: Vector) -> str:
    """A vector as a saved graph holds it: float32 bytes, base64."""
    return base64.b64encode(np.asarray(vector, np.float32).tobytes()).decode()


def _vector(encoded: str) -> Vector:
    return np.frombuffer(base64.b64decode(encoded), dtype=np.float32).copy()
