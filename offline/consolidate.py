"""The consolidation job: MTM batch since the watermark -> rule de-identification -> large
model -> knowledge units (validated) -> the same rules over the output -> nearest anchors ->
insert / merge / update / discard -> decay -> atomic save with the advanced watermark.

The model is called without any lock held; only the batch snapshot (under the memory's write
lock, milliseconds) and each chunk's commit (under the graph's lock) are serialised, so a
user's ``add()`` never waits for a model call. Each chunk commits on its own: a run that fails
part-way keeps what it finished and the next run starts at the first unfinished entry.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import numpy as np
from tiermem.components import Components
from tiermem.config import ConsolidationConfig
from tiermem.embedding.base import EmbedMode, check_vectors
from tiermem.errors import SLMOutputInvalid, SLMTimeout
from tiermem.ltm.graph import RELATION_WORDS, NodeKind, Relation
from tiermem.ltm.store import LongTermMemory
from tiermem.ltm.update import Action, EdgeUnit, NodeUnit, UpdateCounts
from tiermem.offline.batch import advance, live_marks, pending_entries, select_batch, version
from tiermem.offline.deid import Deidentifier
from tiermem.slm.prompts import consolidator as prompt
from tiermem.slm.roles.common import RoleRuntime
from tiermem.types import MemoryEntry, SearchFilters

logger = logging.getLogger(__name__)

# Entries touched this close to a run's snapshot are tracked one by one, not by watermark.
WATERMARK_MARGIN = timedelta(minutes=2)


@dataclass(slots=True)
class ConsolidationReport:
    """What one run did."""

    users: int = 0
    entries: int = 0
    chunks: int = 0
    invalid_chunks: int = 0  # the model's output failed validation; the chunk is skipped
    timed_out_chunks: int = 0  # the model ran past its budget; the chunk is skipped
    counts: UpdateCounts = field(default_factory=UpdateCounts)
    dropped_identifiers: Counter[str] = field(default_factory=Counter)
    scrubbed_identifiers: Counter[str] = field(default_factory=Counter)
    pruned: int = 0
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    nodes: int = 0
    edges: int = 0
    erased_during_run: int = 0

    def summary(self) -> dict[str, Any]:
        c = self.counts
        return {
            "users": self.users,
            "entries": self.entries,
            "chunks": self.chunks,
            "invalid_chunks": self.invalid_chunks,
            "timed_out_chunks": self.timed_out_chunks,
            "inserted": c.inserted,
            "merged": c.merged,
            "updated": c.updated,
            "discarded": c.discarded,
            "repeats": c.repeats,
            "dropped_identifiers": sum(self.dropped_identifiers.values()),
            "scrubbed_identifiers": sum(self.scrubbed_identifiers.values()),
            "pruned": self.pruned,
            "seconds": round(self.seconds, 3),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "nodes": self.nodes,
            "edges": self.edges,
        }


@dataclass(frozen=True, slots=True)
class _Units:
    nodes: list[NodeUnit]
    edges: list[EdgeUnit]


class ConsolidationJob:
    """Runs consolidation for every user (or one). Not re-entrant: the scheduler and
    ``Memory.consolidate_now`` make sure only one run is in flight."""

    def __init__(
        self,
        components: Components,
        ltm: LongTermMemory,
        runtime: RoleRuntime,
        config: ConsolidationConfig,
        snapshot_lock: AbstractContextManager[Any],
    ) -> None:
        self._c = components
        self._ltm = ltm
        self._rt = runtime
        self._config = config
        self._snapshot_lock = snapshot_lock
        self.stop = threading.Event()

    def run_once(self, user_id: str | None = None) -> ConsolidationReport:
        started = time.perf_counter()
        report = ConsolidationReport()
        before = self._tokens()
        every_user = self._c.journal.user_ids()  # all of them are identifiers to scrub
        for uid in [user_id] if user_id is not None else every_user:
            if self.stop.is_set():
                break
            self._run_user(uid, every_user, report)
        after = self._tokens()
        report.prompt_tokens = after[0] - before[0]
        report.completion_tokens = after[1] - before[1]
        if not self.stop.is_set():
            report.pruned += len(self._ltm.decay_now(self._c.clock.now()))
        report.nodes, report.edges = self._ltm.node_count, self._ltm.edge_count
        report.seconds = time.perf_counter() - started
        return report

    def _tokens(self) -> tuple[int, int]:
        stats = self._c.meter.snapshot().get(prompt.SPEC.name, {})
        return int(stats.get("prompt_tokens", 0)), int(stats.get("completion_tokens", 0))  # type: ignore[call-overload]

    def _run_user(self, uid: str, all_users: Sequence[str], report: ConsolidationReport) -> None:
        ticket = self._ltm.begin(uid)
        now = self._c.clock.now()
        with self._snapshot_lock:
            entries = self._c.store.list_entries(uid, SearchFilters())
            names = self._c.journal.speakers()  # every name known to the space
        if not entries:
            return
        prov = self._ltm.provenance

        def mark(e: MemoryEntry) -> str:
            return prov.mark(uid, e.id, version(e)[0].isoformat())

        state = live_marks(ticket.state, entries, mark)
        pending = pending_entries(entries, state, mark)
        batch = select_batch(
            entries,
            state,
            mark,
            now=now,
            capacity=self._c.policy.capacity,
            pressure=self._config.capacity_pressure,
            batch_size=self._config.batch_size,
        )
        if not batch:
            return
        report.users += 1
        deid = Deidentifier(names=names, user_ids=all_users)
        size = self._config.chunk_size
        runs = ticket.state.runs + 1
        for start in range(0, len(batch), size):
            if self.stop.is_set():
                return
            chunk = batch[start : start + size]
            units = self._units(uid, chunk, deid, report)
            state = advance(state, chunk, pending, mark, now - WATERMARK_MARGIN)
            state = replace(state, runs=runs)
            committed = self._ltm.commit(ticket, units.nodes, units.edges, state, now)
            if committed is None:  # the user was erased meanwhile: nothing of theirs stays
                report.erased_during_run += 1
                return
            ticket, result = committed
            report.counts.add(result.counts)
            report.pruned += len(result.pruned)
            report.entries += len(chunk)
            report.chunks += 1

    # -- one chunk ---------------------------------------------------------------------------
    def _units(
        self,
        uid: str,
        chunk: Sequence[MemoryEntry],
        deid: Deidentifier,
        report: ConsolidationReport,
    ) -> _Units:
        scrubbed = []
        for e in chunk:
            s = deid.scrub(e.text)
            report.scrubbed_identifiers.update(s.found)
            scrubbed.append(s.text)
        vectors = self._embed(scrubbed)
        anchors = self._anchors(vectors)
        inp = prompt.ConsolidatorInput(scrubbed, [text for _, text in anchors])
        try:
            output = self._rt.call(
                prompt.SPEC, prompt.build_messages(inp), schema=output_schema(len(anchors))
            )
        except (SLMOutputInvalid, SLMTimeout) as exc:
            # Deterministic decoding would fail the same way again: skip, do not block the
            # queue. An unavailable endpoint is transient instead: that raises, and the run is
            # retried from this chunk.
            self._rt.fallback(prompt.SPEC.name, exc, "skipping the chunk")
            if isinstance(exc, SLMTimeout):
                report.timed_out_chunks += 1
            else:
                report.invalid_chunks += 1
            return _Units([], [])
        return self._to_units(uid, chunk, vectors, anchors, output, deid, report)

    def _embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        vectors = self._c.embedder.embed(list(texts), EmbedMode.DOCUMENT)
        return check_vectors(vectors, len(texts), self._ltm.dim, self._c.embedder.name)

    def _anchors(self, vectors: np.ndarray[Any, np.dtype[np.float32]]) -> list[tuple[str, str]]:
        """The nodes nearest to the chunk's memories, nearest first, without repeats."""
        limit = self._config.anchors
        seen: dict[str, str] = {}
        per_entry = max(1, -(-limit // max(1, len(vectors))))
        for v in vectors:
            for nid, text in self._ltm.anchors(v, per_entry):
                if len(seen) < limit:
                    seen.setdefault(nid, text)
        return list(seen.items())

    def _to_units(
        self,
        uid: str,
        chunk: Sequence[MemoryEntry],
        entry_vectors: np.ndarray[Any, np.dtype[np.float32]],
        anchors: Sequence[tuple[str, str]],
        output: prompt.ConsolidatorOutput,
        deid: Deidentifier,
        report: ConsolidationReport,
    ) -> _Units:
        def clean(*texts: str) -> list[str] | None:
            out = [deid.neutralise(t) for t in texts]
            found = [kind for t in out for kind in deid.identifiers(t)]
            if found:
                report.dropped_identifiers.update(found)
                return None
            return out

        raw_nodes: list[tuple[str, NodeKind, str, Action, str | None]] = []
        for n in output.nodes:
            cleaned = clean(n.name, n.text)
            if cleaned is None or not cleaned[0]:
                continue
            anchor = anchors[n.anchor - 1][0] if 0 < n.anchor <= len(anchors) else None
            raw_nodes.append((cleaned[0], NodeKind(n.kind), cleaned[1], Action(n.action), anchor))
        names = {r[0].lower() for r in raw_nodes}
        raw_edges: list[tuple[str, Relation, str, str, Action]] = []
        for e in output.edges:
            cleaned = clean(e.source, e.target, e.text)
            if cleaned is None or not cleaned[0] or not cleaned[1]:
                continue
            raw_edges.append(
                (cleaned[0], Relation(e.relation), cleaned[1], cleaned[2], Action(e.action))
            )
            for endpoint in (cleaned[0], cleaned[1]):  # an endpoint the model did not list
                if endpoint.lower() not in names:
                    names.add(endpoint.lower())
                    raw_nodes.append((endpoint, NodeKind.CONCEPT, endpoint, Action.INSERT, None))
        texts = [f"{name}: {text}" for name, _, text, _, _ in raw_nodes] + [
            f"{s} {RELATION_WORDS[r]} {t}: {text}" for s, r, t, text, _ in raw_edges
        ]
        if not texts:
            return _Units([], [])
        vectors = self._embed(texts)
        keys = self._attribute(uid, chunk, entry_vectors, vectors)
        nodes = [
            NodeUnit(name, kind, text, action, vectors[i], keys[i], anchor)
            for i, (name, kind, text, action, anchor) in enumerate(raw_nodes)
        ]
        offset = len(raw_nodes)
        edges = [
            EdgeUnit(s, r, t, text, action, vectors[offset + i], keys[offset + i])
            for i, (s, r, t, text, action) in enumerate(raw_edges)
        ]
        return _Units(nodes, edges)

    def _attribute(
        self,
        uid: str,
        chunk: Sequence[MemoryEntry],
        entry_vectors: np.ndarray[Any, np.dtype[np.float32]],
        unit_vectors: np.ndarray[Any, np.dtype[np.float32]],
    ) -> list[str]:
        """Each unit is supported by the chunk's memory it is most similar to: one unit, one
        piece of evidence, and erasing that memory's user withdraws exactly it."""
        best = np.argmax(unit_vectors @ entry_vectors.T, axis=1)
        return [self._ltm.provenance.entry_key(uid, chunk[int(i)].id) for i in best]


def output_schema(anchors: int) -> dict[str, Any]:
    """The task's schema with ``anchor`` narrowed to the numbers actually shown."""
    schema = prompt.SPEC.json_schema()
    node = schema["properties"]["nodes"]["items"]
    node["properties"]["anchor"] = {"type": "integer", "enum": list(range(anchors + 1))}
    return schema
