"""The systems a LoCoMo run compares, behind one interface: build from a conversation, then
retrieve the context for a question. Baselines index the raw turns ``Speaker: text``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Protocol

import numpy as np
from qdrant_client.local.bm25 import DEFAULT_B, DEFAULT_K1, bm25_scores, document_tokens
from tiermem.bench.datasets.locomo import LocomoSample, session_messages
from tiermem.config import TiermemConfig
from tiermem.embedding.base import Embedder, EmbedMode
from tiermem.memory import Memory
from tiermem.render import human_date, render_context


@dataclass(frozen=True, slots=True)
class Retrieved:
    turn_ids: tuple[str, ...]  # the source turns of what is handed to the generator
    context: Sequence[str]  # the lines handed to the generator
    latency_s: float


@dataclass
class BuildCost:
    seconds: float = 0.0
    slm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    entries: int = 0
    fallbacks: int = 0
    events: dict[str, int] = field(default_factory=dict)


class System(Protocol):
    name: str

    def build(self, sample: LocomoSample) -> BuildCost: ...

    def retrieve(self, question: str) -> Retrieved: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _Turn:
    dia_id: str
    line: str  # "[date] Speaker: text", what a generator sees
    indexed: str  # "Speaker: text", what the baseline indexes


def _turns(sample: LocomoSample) -> list[_Turn]:
    out = []
    for session in sample.sessions:
        when = human_date(session.date) if session.date else "unknown date"
        out += [
            _Turn(t.dia_id, f"[{when}] {t.speaker}: {t.text}", f"{t.speaker}: {t.text}")
            for t in session.turns
        ]
    return out


def _delivered(turns: Sequence[_Turn], top: Sequence[int], started: float) -> Retrieved:
    """The chosen turns, as delivered to a generator, with the time since ``started``."""
    return Retrieved(
        tuple(turns[i].dia_id for i in top),
        [turns[i].line for i in top],
        time.perf_counter() - started,
    )


class NaiveRAG:
    """Top-k turns by all-MiniLM-L6-v2 cosine."""

    def __init__(self, embedder: Embedder, k: int) -> None:
        self.name = "naive-rag"
        self._embedder, self._k = embedder, k
        self._turns: list[_Turn] = []
        self._matrix = np.zeros((0, embedder.dim), dtype=np.float32)

    def build(self, sample: LocomoSample) -> BuildCost:
        started = time.perf_counter()
        self._turns = _turns(sample)
        self._matrix = self._embedder.embed([t.indexed for t in self._turns], EmbedMode.DOCUMENT)
        return BuildCost(seconds=time.perf_counter() - started, entries=len(self._turns))

    def retrieve(self, question: str) -> Retrieved:
        started = time.perf_counter()
        scores = self._matrix @ self._embedder.embed([question], EmbedMode.QUERY)[0]
        top = [int(i) for i in np.argsort(-scores, kind="stable")[: self._k]]
        return _delivered(self._turns, top, started)

    def close(self) -> None:
        return None


class BM25:
    """Top-k turns by BM25 (the same scorer and tokenizer as Qdrant's text index)."""

    def __init__(self, k: int) -> None:
        self.name = "bm25"
        self._k = k
        self._turns: list[_Turn] = []
        self._docs: dict[int, list[str]] = {}

    def build(self, sample: LocomoSample) -> BuildCost:
        started = time.perf_counter()
        self._turns = _turns(sample)
        self._docs = {
            i: tokens for i, t in enumerate(self._turns) if (tokens := document_tokens([t.indexed]))
        }
        return BuildCost(seconds=time.perf_counter() - started, entries=len(self._turns))

    def retrieve(self, question: str) -> Retrieved:
        started = time.perf_counter()
        scores = bm25_scores(self._docs, question, DEFAULT_K1, DEFAULT_B)
        top = sorted(scores, key=lambda i: (-scores[i], i))[: self._k]
        return _delivered(self._turns, top, started)

    def close(self) -> None:
        return None


class FullContext:
    """Every turn of the conversation: the ceiling on recall and the floor on efficiency."""

    def __init__(self) -> None:
        self.name = "full-context"
        self._turns: list[_Turn] = []

    def build(self, sample: LocomoSample) -> BuildCost:
        self._turns = _turns(sample)
        return BuildCost(entries=len(self._turns))

    def retrieve(self, question: str) -> Retrieved:
        return Retrieved(tuple(t.dia_id for t in self._turns), [t.line for t in self._turns], 0.0)

    def close(self) -> None:
        return None


class Tiermem:
    """The full online path: ingestion through ``add()`` (rules, writer, resolve), retrieval
    through ``search()`` (controller, hybrid first stage, selector). The memory lives under
    ``state_dir`` so an interrupted run resumes its ingestion where it stopped."""

    def __init__(self, config: TiermemConfig, state_dir: Path, k: int) -> None:
        self.name = "tiermem"
        self._config, self._state, self._k = config, state_dir, k
        self._memory: Memory | None = None
        self._user = ""

    def build(self, sample: LocomoSample) -> BuildCost:
        self._user = sample.sample_id
        config = TiermemConfig.for_data_dir(self._state / sample.sample_id)
        self._memory = Memory(
            self._config.model_copy(
                update={"data_dir": config.data_dir, "mtm": config.mtm, "journal": config.journal}
            )
        )
        started = time.perf_counter()
        entries = 0
        previous = next((s.date for s in sample.sessions if s.date), None)
        assert previous is not None, "a conversation needs at least one dated session"
        for session in sample.sessions:
            # An undated session is taken to be a day after the one before it.
            when = session.date or previous + timedelta(days=1)
            result = self._memory.add(
                session_messages(session, when), self._user, f"s{session.index}"
            )
            entries += len(result.entries)
            previous = when
        totals = self._memory.components.meter.totals()
        events: dict[str, int] = {}
        for stats in self._memory.components.meter.snapshot().values():
            for name, count in dict(stats["events"]).items():  # type: ignore[call-overload]
                events[name] = events.get(name, 0) + count
        return BuildCost(
            time.perf_counter() - started,
            totals["calls"],
            totals["prompt_tokens"],
            totals["completion_tokens"],
            entries,
            totals["fallbacks"],
            events,
        )

    def retrieve(self, question: str) -> Retrieved:
        assert self._memory is not None
        started = time.perf_counter()
        hits = self._memory.search(question, self._user, k=self._k)
        latency = time.perf_counter() - started
        turns = tuple(dict.fromkeys(t for h in hits for t in h.source_turn_ids))
        return Retrieved(turns, render_context(hits).splitlines(), latency)

    @property
    def memory(self) -> Memory | None:
        return self._memory

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()
