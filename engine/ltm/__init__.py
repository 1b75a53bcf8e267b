"""LTM: a de-identified knowledge graph shared across users, with an embedding index kept in
step with it. Written only by the offline consolidation job; read beside MTM on every search.
"""

from tiermem.ltm.decay import Confidence, confidence
from tiermem.ltm.graph import KnowledgeGraph, NodeKind, Relation
from tiermem.ltm.provenance import Provenance, load_or_create_secret
from tiermem.ltm.store import LongTermMemory, LTMFact, UserState

__all__ = [
    "Confidence",
    "KnowledgeGraph",
    "LTMFact",
    "LongTermMemory",
    "NodeKind",
    "Provenance",
    "Relation",
    "UserState",
    "confidence",
    "load_or_create_secret",
]
