"""The systems a benchmark run compares, behind one interface: build from a conversation, then
retrieve the context for a question. Baselines index the raw turns ``Speaker: text``; tiermem
ingests each session through ``add()`` (:func:`ingested` does the same for the training sets
and ``bench selector``, in a temporary folder)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import numpy as np
from qdrant_client.local.bm25 import DEFAULT_B, DEFAULT_K1, bm25_scores, document_tokens
from tiermem.bench import BenchInputError
from tiermem.bench.datasets.conversation import Conversation, conversation_adds, session_dates
from tiermem.components import Components, build_components
from tiermem.config import EdgeStoreConfig, QdrantConfig, TiermemConfig
from tiermem.context import ContextTurn, Unit, pack
from tiermem.embedding.base import Embedder, EmbedMode
from tiermem.memory import Memory


@dataclass(frozen=True, slots=True)
class Retrieved:
    turn_ids: tuple[str, ...]  # the source turns of what is handed to the generator
    context: Sequence[str]  # the lines handed to the generator
    latency_s: float
    tokens: int = 0  # of the delivered text, by the run's token counter


@dataclass
class BuildCost:
    seconds: float = 0.0
    slm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    entries: int = 0
    fallbacks: int = 0
    events: dict[str, int] = field(default_factory=dict)


Budget = int | None  # a token ceiling; None: the fixed-k delivery


class System(Protocol):
    name: str

    def build(self, sample: Conversation) -> BuildCost: ...

    def deliver(self, question: str, budgets: Sequence[Budget]) -> list[Retrieved]:
        """What the system hands a generator for ``question``, once per budget: the most it
        can deliver within each, in its own order (``None``: its top ``k``)."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _Turns:
    """A conversation's turns as the context builder sees them, and as baselines index them
    (``Speaker: text``)."""

    ordered: tuple[ContextTurn, ...]
    by_id: dict[str, ContextTurn]

    @property
    def indexed(self) -> list[str]:
        return [t.line for t in self.ordered]


def _turns(sample: Conversation) -> _Turns:
    out = []
    for session, when in zip(sample.sessions, session_dates(sample), strict=True):
        out += [
            ContextTurn(t.turn_id, f"s{session.index}", i, t.speaker, t.text, when)
            for i, t in enumerate(session.turns)
        ]
    return _Turns(tuple(out), {t.turn_id: t for t in out})


def _ranked_delivery(
    turns: _Turns, ranked: Sequence[int], k: int, budgets: Sequence[Budget], latency: float
) -> list[Retrieved]:
    """A ranking of single turns, delivered through the context builder at each budget
    (``None``: its top ``k``), every budget sharing the ranking's latency."""
    out = []
    for budget in budgets:
        order = ranked[:k] if budget is None else ranked
        units = [Unit((turns.ordered[i].turn_id,), 1.0) for i in order]
        ctx = pack(units, turns.by_id, budget if budget is not None else 10**9)
        out.append(Retrieved(ctx.turn_ids, ctx.lines, latency, ctx.tokens))
    return out


class NaiveRAG:
    """Turns by all-MiniLM-L6-v2 cosine."""

    def __init__(self, embedder: Embedder, k: int) -> None:
        self.name = "naive-rag"
        self._embedder, self._k = embedder, k
        self._turns = _Turns((), {})
        self._matrix = np.zeros((0, embedder.dim), dtype=np.float32)

    def build(self, sample: Conversation) -> BuildCost:
        started = time.perf_counter()
        self._turns = _turns(sample)
        self._matrix = self._embedder.embed(self._turns.indexed, EmbedMode.DOCUMENT)
        return BuildCost(seconds=time.perf_counter() - started, entries=len(self._turns.ordered))

    @property
    def turns(self) -> _Turns:
        return self._turns

    def ranking(self, question: str) -> list[int]:
        """Every turn's index, nearest first."""
        scores = self._matrix @ self._embedder.embed([question], EmbedMode.QUERY)[0]
        return [int(i) for i in np.argsort(-scores, kind="stable")]

    def deliver(self, question: str, budgets: Sequence[Budget]) -> list[Retrieved]:
        started = time.perf_counter()
        ranked = self.ranking(question)
        return _ranked_delivery(
            self._turns, ranked, self._k, budgets, time.perf_counter() - started
        )

    def close(self) -> None:
        return None


class BM25:
    """Turns by BM25 (the same scorer and tokenizer as Qdrant's text index)."""

    def __init__(self, k: int) -> None:
        self.name = "bm25"
        self._k = k
        self._turns = _Turns((), {})
        self._docs: dict[int, list[str]] = {}

    def build(self, sample: Conversation) -> BuildCost:
        started = time.perf_counter()
        self._turns = _turns(sample)
        self._docs = {
            i: tokens for i, t in enumerate(self._turns.indexed) if (tokens := document_tokens([t]))
        }
        return BuildCost(seconds=time.perf_counter() - started, entries=len(self._turns.ordered))

    def ranking(self, question: str) -> list[int]:
        """The index of every turn that shares a term with ``question``, best first."""
        scores = bm25_scores(self._docs, question, DEFAULT_K1, DEFAULT_B)
        return sorted((i for i in scores if scores[i] > 0), key=lambda i: (-scores[i], i))

    def deliver(self, question: str, budgets: Sequence[Budget]) -> list[Retrieved]:
        started = time.perf_counter()
        ranked = self.ranking(question)
        return _ranked_delivery(
            self._turns, ranked, self._k, budgets, time.perf_counter() - started
        )

    def close(self) -> None:
        return None


class Hybrid:
    """Turns by plain reciprocal-rank fusion of MiniLM cosine and BM25 (``k = 60``, both
    rankings whole): the simplest hybrid retrieval a user could build, and the baseline
    tiermem's machinery has to beat."""

    RRF_K = 60  # the constant of the original RRF paper, unchosen

    def __init__(self, embedder: Embedder, k: int) -> None:
        self.name = "hybrid"
        self._k = k
        self._dense, self._lexical = NaiveRAG(embedder, k), BM25(k)

    def build(self, sample: Conversation) -> BuildCost:
        dense, lexical = self._dense.build(sample), self._lexical.build(sample)
        return BuildCost(seconds=dense.seconds + lexical.seconds, entries=dense.entries)

    def deliver(self, question: str, budgets: Sequence[Budget]) -> list[Retrieved]:
        started = time.perf_counter()
        fused: dict[int, float] = {}
        for ranking in (self._dense.ranking(question), self._lexical.ranking(question)):
            for rank, i in enumerate(ranking):
                fused[i] = fused.get(i, 0.0) + 1.0 / (self.RRF_K + rank + 1)
        ranked = sorted(fused, key=lambda i: (-fused[i], i))
        return _ranked_delivery(
            self._dense.turns, ranked, self._k, budgets, time.perf_counter() - started
        )

    def close(self) -> None:
        return None


class FullContext:
    """Every turn of the conversation, whatever the budget: the ceiling on recall and the
    floor on efficiency."""

    def __init__(self) -> None:
        self.name = "full-context"
        self._turns = _Turns((), {})

    def build(self, sample: Conversation) -> BuildCost:
        self._turns = _turns(sample)
        return BuildCost(entries=len(self._turns.ordered))

    def deliver(self, question: str, budgets: Sequence[Budget]) -> list[Retrieved]:
        every = range(len(self._turns.ordered))
        return _ranked_delivery(self._turns, every, len(every), [None] * len(budgets), 0.0)

    def close(self) -> None:
        return None


class Tiermem:
    """The full online path: ingestion through ``add()`` (rules, writer, resolve), retrieval
    through ``search()`` (controller, hybrid first stage, selector). The memory lives under
    ``state_dir`` so an interrupted run resumes its ingestion where it stopped."""

    def __init__(
        self,
        config: TiermemConfig,
        state_dir: Path,
        k: int = 10,
        embedder: Embedder | None = None,
    ) -> None:
        self.name = "tiermem"
        self._config, self._state, self._k = config, state_dir, k
        self._embedder = embedder  # e.g. the run's cached one; None: the config's own
        self._memory: Memory | None = None
        self._user = ""

    def build(self, sample: Conversation) -> BuildCost:
        self._user = sample.sample_id
        root = self._state / sample.sample_id
        paths = TiermemConfig.for_data_dir(root)
        mtm = paths.mtm  # the embedded default (a state written in local mode keeps it)
        if isinstance(self._config.mtm, EdgeStoreConfig):  # Edge shards beside the journal
            mtm = self._config.mtm.model_copy(update={"path": root / "edge"})
        elif isinstance(self._config.mtm, QdrantConfig) and self._config.mtm.location == "path":
            mtm = self._config.mtm.model_copy(update={"path": root / "qdrant"})  # local mode
        config = self._config.model_copy(
            update={"data_dir": paths.data_dir, "mtm": mtm, "journal": paths.journal}
        )
        components = self._components(config)
        self._memory = Memory(config, components=components)
        started = time.perf_counter()
        entries = 0
        for session_id, messages in conversation_adds(sample):
            entries += len(self._memory.add(messages, self._user, session_id).entries)
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

    def _components(self, config: TiermemConfig) -> Components | None:
        """The memory's collaborators with the given embedder in place of the config's own
        (``None``: built by ``Memory`` from the config)."""
        if self._embedder is None:
            return None
        built = build_components(config)
        if built.store.dim != self._embedder.dim:
            for close in (built.store.close, built.journal.close, *built.closers):
                close()
            raise BenchInputError(
                f"embedder {self._embedder.name} gives {self._embedder.dim}-d vectors, the "
                f"store is configured for {built.store.dim}"
            )
        return replace(built, embedder=self._embedder)

    def deliver(self, question: str, budgets: Sequence[Budget]) -> list[Retrieved]:
        """``Memory.context()`` at each budget, timed alone (``None``: the top ``k`` hits'
        own turns, unexpanded)."""
        assert self._memory is not None
        out = []
        for budget in budgets:
            started = time.perf_counter()
            if budget is None:
                ctx = self._memory.context(question, self._user, 10**9, k=self._k, expand=False)
            else:
                ctx = self._memory.context(question, self._user, budget)
            latency = time.perf_counter() - started
            out.append(Retrieved(ctx.turn_ids, ctx.lines, latency, ctx.tokens))
        return out

    @property
    def memory(self) -> Memory | None:
        return self._memory

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()


@contextmanager
def ingested(
    conversation: Conversation, config: TiermemConfig, embedder: Embedder | None = None
) -> Iterator[Memory]:
    """``conversation`` in a fresh tiermem memory under a temporary folder, ingested as ``bench
    locomo`` ingests it (:class:`Tiermem`); ``embedder``: e.g. the caller's cached one, else
    the config's own. The memory is closed and its folder removed on exit."""
    with tempfile.TemporaryDirectory(prefix="tiermem-ingested-") as state:
        system = Tiermem(config, Path(state), embedder=embedder)
        try:
            system.build(conversation)
            assert system.memory is not None
            yield system.memory
        finally:
            system.close()
