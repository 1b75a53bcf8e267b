"""Changes to the shared knowledge graph, as the LTM audit log records them.

The type lives apart from both the graph (``tiermem.ltm``) and the journal: the graph emits
changes, the journal stores them, and neither has to import the other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Change:
    """One change to the graph, for the LTM audit log: ``INSERT``, ``SUPPORT`` (new
    evidence), ``UPDATE`` (text replaced), ``PRUNE`` (decayed away), ``WITHDRAW`` (erasure took
    evidence) or ``REMOVE`` (erasure took the last evidence). Texts are de-identified."""

    op: str
    item: str
    before: str | None
    after: str | None
    evidence: int
