"""``LongTermMemory``: the knowledge graph with its lock, its file and the consolidation state.

Reads (``search``) and the offline job's writes (``commit``) are serialised by one lock held
only for in-memory work; the file is written outside it. The file holds the graph and each
user's consolidation watermark under an opaque key, saved together atomically: the graph on
disk and the watermark can never disagree.

One process writes a graph: its directory is locked (``DirectoryLock``) from open to
``close()``, and a second writer refuses to start (``LTMLockedError``) instead of overwriting
it. A ``read_only`` view (for inspection) takes no lock and never saves.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy.typing as npt
from tiermem.changes import Change
from tiermem.embedding.base import Embedder, EmbedMode, check_vectors
from tiermem.errors import LTMCorruptError, LTMEmbedderMismatchError, LTMError
from tiermem.ltm.decay import Confidence
from tiermem.ltm.graph import DecayPolicy, KnowledgeGraph, encode_vector
from tiermem.ltm.index import normalized
from tiermem.ltm.persist import DirectoryLock, atomic_write, discard_leftovers
from tiermem.ltm.provenance import Provenance
from tiermem.ltm.update import EdgeUnit, NodeUnit, UpdateCounts, apply_units
from tiermem.types import LTM_ID_PREFIX, KnowledgeFact

logger = logging.getLogger(__name__)

AuditSink = Callable[[Sequence[Change], datetime, str], None]
SCHEMA = "tiermem-ltm"
SCHEMA_VERSION = 1
DEFAULT_DECAY = DecayPolicy()
GRAPH_FILE = "graph.json"


@dataclass(frozen=True, slots=True)
class UserState:
    """Where consolidation of one user's MTM stands. Entries whose (time, id) is at or below
    ``watermark`` are done; ``ahead`` holds marks of entries done out of order above it."""

    watermark: tuple[str, str] | None = None
    ahead: frozenset[str] = frozenset()
    runs: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "watermark": list(self.watermark) if self.watermark else None,
            "ahead": sorted(self.ahead),
            "runs": self.runs,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UserState:
        wm = data.get("watermark")
        return cls(
            (str(wm[0]), str(wm[1])) if wm else None, frozenset(data["ahead"]), int(data["runs"])
        )


@dataclass(frozen=True, slots=True)
class LTMFact:
    """A piece of knowledge found for a query, rendered as a short fact, with how it was
    reached. ``knowledge()`` is what a search hit shows of it."""

    id: str  # the graph id ("n:..." or "e:...")
    text: str
    kind: str  # NodeKind or Relation
    score: float  # cosine of the seed it was reached from, halved per hop
    confidence: Confidence
    evidence: int
    first_supported: datetime
    last_supported: datetime
    hops: int

    def knowledge(self) -> KnowledgeFact:
        """The fact as the read path hands it out: under its ``ltm:`` id, owned by no one."""
        return KnowledgeFact(
            id=LTM_ID_PREFIX + self.id,
            text=self.text,
            kind=self.kind,
            evidence=self.evidence,
            confidence=self.confidence.value,
            first_supported=self.first_supported,
            last_supported=self.last_supported,
        )


@dataclass(frozen=True, slots=True)
class SearchPolicy:
    seeds: int = 4
    hops: int = 1
    min_similarity: float = 0.35
    hop_discount: float = 0.5


@dataclass(frozen=True, slots=True)
class Ticket:
    """What a consolidation run read at its start; its commit is refused if that changed."""

    user_key: str
    state: UserState
    epoch: int


@dataclass(slots=True)
class CommitResult:
    counts: UpdateCounts
    pruned: list[str] = field(default_factory=list)


class LongTermMemory:
    """The cross-user knowledge graph. ``path=None`` keeps it in memory only."""

    def __init__(
        self,
        path: Path | None,
        dim: int,
        provenance: Provenance,
        *,
        decay: DecayPolicy = DEFAULT_DECAY,
        search_policy: SearchPolicy | None = None,
        merge_threshold: float = 0.9,
        audit: AuditSink | None = None,
        read_only: bool = False,
        embedder: str | None = None,
    ) -> None:
        self.path = path
        self.dim = dim
        # The embedder whose vectors the graph holds: checked against a saved graph's record
        # and recorded when saved (None checks nothing and keeps the saved record).
        self.embedder = embedder
        self.provenance = provenance
        self.decay = decay
        self.search_policy = search_policy or SearchPolicy()
        self.merge_threshold = merge_threshold
        self._audit = audit
        self._lock = threading.RLock()
        self._save_lock = threading.Lock()
        self._generation = 0
        self._saved_generation = 0
        self._epochs: dict[str, int] = {}  # bumped by erasure, checked by commits
        self.read_only = read_only
        self._closed = False
        # One writer per graph: held from here to close(), refused to anyone else meanwhile.
        self._dir_lock = None if path is None or read_only else DirectoryLock.acquire(path)
        try:
            self._graph, self._states = self._load()
        except BaseException:
            if self._dir_lock is not None:
                self._dir_lock.release()
            raise

    # -- files -------------------------------------------------------------------------------
    @property
    def file(self) -> Path | None:
        return self.path / GRAPH_FILE if self.path is not None else None

    def _load(self) -> tuple[KnowledgeGraph, dict[str, UserState]]:
        file = self.file
        if file is None:
            return KnowledgeGraph(self.dim), {}
        if not self.read_only:  # a reader must not take a writer's half-written save away
            discard_leftovers(file)
        try:
            raw = file.read_bytes()
        except FileNotFoundError:
            return KnowledgeGraph(self.dim), {}
        except OSError as exc:  # a directory in its place, no permission
            raise LTMError(
                f"knowledge graph at {file} cannot be read: {exc.strerror or exc}"
            ) from exc
        try:
            doc = json.loads(raw)
            if doc.get("schema") != SCHEMA:
                raise LTMCorruptError(file, "not a tiermem knowledge graph")
            if doc.get("version") != SCHEMA_VERSION:
                raise LTMCorruptError(file, f"schema version {doc.get('version')!r}")
            recorded = doc.get("embedder")  # absent in a graph saved before it was recorded
            if self.embedder is not None and recorded not in (None, self.embedder):
                raise LTMEmbedderMismatchError(file, str(recorded), self.embedder)
            self.embedder = self.embedder or recorded
            if doc.get("dim") != self.dim:
                raise LTMCorruptError(file, f"embedding dim {doc.get('dim')} is not {self.dim}")
            graph = KnowledgeGraph.from_records(self.dim, doc["graph"])
            states = {k: UserState.from_json(v) for k, v in doc["users"].items()}
        except (LTMCorruptError, LTMEmbedderMismatchError):
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise LTMCorruptError(file, f"{type(exc).__name__}: {exc}") from exc
        return graph, states

    def _snapshot(self) -> bytes:
        doc = {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "dim": self.dim,
            "embedder": self.embedder,
            "graph": self._graph.to_records(),
            "users": {k: s.to_json() for k, s in sorted(self._states.items())},
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    def save(self) -> None:
        """Write the current graph and states atomically (no-op in memory-only mode)."""
        self._check_writable()
        file = self.file
        if file is None:
            return
        with self._save_lock:
            with self._lock:
                generation = self._generation
                if generation == self._saved_generation and file.exists():
                    return
                data = self._snapshot()
            try:
                atomic_write(file, data)
            except OSError as exc:  # a full or read-only disk: the graph on disk is the old one
                raise LTMError(f"cannot write the knowledge graph to {file}: {exc}") from exc
            self._saved_generation = generation

    def close(self) -> None:
        """Save what changed and release the directory (idempotent). Reads still answer from
        memory afterwards; writes raise ``LTMError``."""
        if self._closed:
            return
        try:
            if not self.read_only:
                self.save()
        finally:
            self._closed = True
            if self._dir_lock is not None:
                self._dir_lock.release()

    def _check_writable(self) -> None:
        if self._closed:
            raise LTMError(f"knowledge graph at {self.path} is closed")
        if self.read_only:
            raise LTMError(f"knowledge graph at {self.path} is open read-only")

    # -- reads -------------------------------------------------------------------------------
    @property
    def node_count(self) -> int:
        with self._lock:
            return self._graph.node_count

    @property
    def edge_count(self) -> int:
        with self._lock:
            return self._graph.edge_count

    def state(self, user_id: str) -> UserState:
        with self._lock:
            return self._states.get(self.provenance.user_key(user_id), UserState())

    def facts(self) -> list[str]:
        """Every node and edge rendered as a fact (for inspection and tests)."""
        with self._lock:
            return [self._graph.render(i) for i in self._graph.items()]

    def inventory(self, now: datetime) -> list[LTMFact]:
        """Every node and edge with its evidence and confidence now (for inspection)."""
        with self._lock:
            return [self._fact(i, 1.0, 0, now) for i in self._graph.items()]

    def supported_by(self, keys: AbstractSet[str], now: datetime) -> list[tuple[LTMFact, int]]:
        """Every item that some of ``keys`` support, with how many of them do: given one
        user's entry keys (``provenance.entry_keys``), what that user's memories fed, found by
        the keys alone (the graph holds no user id). Most supported by ``keys`` first."""
        with self._lock:
            graph = self._graph
            shares = [(i, len(graph.data(i)["provenance"] & keys)) for i in graph.items()]
            found = [(self._fact(i, 1.0, 0, now), n) for i, n in shares if n]
        return sorted(found, key=lambda x: (-x[1], -x[0].evidence, x[0].text))

    def _fact(self, item_id: str, score: float, hops: int, now: datetime) -> LTMFact:
        item = self._graph.item(item_id)
        return LTMFact(
            item_id,
            item.text,
            item.kind,
            score,
            self._graph.confidence(item_id, now, self.decay),
            item.evidence,
            item.first_supported,
            item.last_supported,
            hops,
        )

    def anchors(self, vector: npt.ArrayLike, n: int) -> list[tuple[str, str]]:
        """The ``n`` nodes nearest to ``vector``: (node id, rendered fact)."""
        with self._lock:
            found = self._graph.index.search(vector, n, prefix="n:")
            return [(nid, self._graph.render(nid)) for nid, _ in found]

    def search(self, vector: npt.ArrayLike, n: int, now: datetime) -> list[LTMFact]:
        """The nodes and edges nearest to ``vector`` (at least ``min_similarity``), expanded
        by ``hops`` along the graph; best first, at most ``n``."""
        p = self.search_policy
        with self._lock:
            g = self._graph
            found: dict[str, tuple[float, int]] = {}
            for item_id, score in g.index.search(vector, p.seeds, min_score=p.min_similarity):
                found[item_id] = max(found.get(item_id, (score, 0)), (score, 0))
                if item_id.startswith("n:") and p.hops > 0:
                    for eid, hop in g.neighbourhood(item_id, p.hops):
                        reached = score * p.hop_discount**hop
                        if reached > found.get(eid, (-1.0, 0))[0]:
                            found[eid] = (reached, hop)
            ranked = sorted(found.items(), key=lambda x: (-x[1][0], x[0]))
            out = []
            for item_id, (score, hop) in ranked:
                fact = self._fact(item_id, score, hop, now)
                if fact.confidence.value < self.decay.prune_below:
                    continue
                out.append(fact)
                if len(out) == n:
                    break
            return out

    # -- writes (the offline job and erasure) ----------------------------------------------------
    def begin(self, user_id: str) -> Ticket:
        """Start work on a user: their current state, to be handed back to ``commit``."""
        key = self.provenance.user_key(user_id)
        with self._lock:
            return Ticket(key, self._states.get(key, UserState()), self._epochs.get(key, 0))

    def commit(
        self,
        ticket: Ticket,
        nodes: Sequence[NodeUnit],
        edges: Sequence[EdgeUnit],
        state: UserState,
        now: datetime,
    ) -> tuple[Ticket, CommitResult] | None:
        """Apply one chunk's units and the user's new state, prune what decayed, and save.
        Returns ``None`` and changes nothing if the user was erased or their state moved on
        since ``ticket``; else the ticket for the next commit and what changed."""
        self._check_writable()
        with self._lock:
            key = ticket.user_key
            current = self._states.get(key, UserState())
            if current != ticket.state or self._epochs.get(key, 0) != ticket.epoch:
                return None
            counts = apply_units(self._graph, nodes, edges, now, self.merge_threshold)
            pruned = self._graph.prune(now, self.decay)
            self._states[key] = state
            self._generation += 1
        self.save()
        changes = counts.changes + [Change("PRUNE", i, text, None, 0) for i, text in pruned]
        self._emit(changes, now, "consolidation")
        return replace(ticket, state=state), CommitResult(counts, [i for i, _ in pruned])

    def forget_user(self, user_id: str, entry_ids: Sequence[str], now: datetime) -> tuple[int, int]:
        """Withdraw the support of these entries of this user and drop the user's state:
        (items removed, items whose evidence was decremented). The audit rows name items,
        never the user."""
        self._check_writable()
        keys = self.provenance.entry_keys(user_id, entry_ids)
        with self._lock:
            # On a copy first: the audit rows go in before the graph changes, since writing
            # them blanks the texts of what only this user supported. Were they written after
            # the save (as other changes are), a crash or a full disk in between would leave
            # those texts in the audit log with nothing left to say which they were.
            graph = copy.deepcopy(self._graph)
            removed, decremented = graph.withdraw(keys)
            changes = [Change("REMOVE", i, text, None, 0) for i, text in removed] + [
                Change("WITHDRAW", i, None, None, left) for i, left in decremented
            ]
            self._emit(changes, now, "erasure")  # raises: nothing has changed
            self._graph = graph
            user_key = self.provenance.user_key(user_id)
            self._states.pop(user_key, None)
            self._epochs[user_key] = self._epochs.get(user_key, 0) + 1
            self._generation += 1
        self.save()  # fails or is killed: the job withdraws again, from the graph on disk
        return len(removed), len(decremented)

    def decay_now(self, now: datetime) -> list[str]:
        """Prune what has decayed below the threshold; the ids removed."""
        self._check_writable()
        with self._lock:
            pruned = self._graph.prune(now, self.decay)
            if pruned:
                self._generation += 1
        self.save()
        self._emit([Change("PRUNE", i, text, None, 0) for i, text in pruned], now, "decay")
        return [i for i, _ in pruned]

    def _emit(self, changes: Sequence[Change], now: datetime, actor: str) -> None:
        """Hand the changes of a saved graph to the audit sink. They are written after the
        save (a crash in between loses audit rows, never knowledge), except an erasure's,
        written before (see ``forget_user``)."""
        if changes and self._audit is not None:
            self._audit(changes, now, actor)


def reembed(path: Path, embedder: Embedder) -> int:
    """Embed every node and edge text of the graph saved under ``path`` again with
    ``embedder``, and record it: ``tiermem reindex --ltm`` after a change of embedder. The
    graph's writer lock is held throughout; the file is replaced atomically, so a failure
    leaves the old graph. Returns the items embedded (0: no graph saved there)."""
    file = path / GRAPH_FILE
    if not file.exists():
        return 0
    lock = DirectoryLock.acquire(path)
    try:
        try:
            doc = json.loads(file.read_bytes())
            if doc.get("schema") != SCHEMA or doc.get("version") != SCHEMA_VERSION:
                raise LTMCorruptError(file, "not a tiermem knowledge graph of this version")
            items = [*doc["graph"]["nodes"], *doc["graph"]["edges"]]
            texts = [str(r["text"]) for r in items]
        except OSError as exc:
            raise LTMError(f"knowledge graph at {file} cannot be read: {exc}") from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise LTMCorruptError(file, f"{type(exc).__name__}: {exc}") from exc
        vectors = embedder.embed(texts, EmbedMode.DOCUMENT) if texts else None
        if vectors is not None:
            check_vectors(vectors, len(texts), embedder.dim, embedder.name)
            for record, vector in zip(items, vectors, strict=True):
                record["vec"] = encode_vector(normalized(vector))
        doc["dim"], doc["embedder"] = embedder.dim, embedder.name
        try:
            atomic_write(file, json.dumps(doc, separators=(",", ":")).encode())
        except OSError as exc:
            raise LTMError(f"cannot write the knowledge graph to {file}: {exc}") from exc
        return len(items)
    finally:
        lock.release()
