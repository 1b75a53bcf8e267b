"""The pointwise selector's training set, built from what the real read path hands it.

For each conversation of a split, the conversation is ingested into a model-free
``tiermem.Memory`` exactly as ``tiermem bench locomo`` ingests it
(:func:`tiermem.bench.systems.ingested`); for each question, ``run_search`` runs (planner,
hybrid first stage, relaxation, tier budget) and the candidates it hands the selector are
taken as they come: the same pool size (``candidate_multiplier * k``, 20 at the benchmark's
``k`` of 10), the same order, each rendered with :func:`tiermem.render.render_memory` and
then through :mod:`tiermem.slm.prompts.relevance`, the module the selector serves with.

A candidate is relevant when one of its source turns is a gold evidence turn of the question
(the turn ids are LoCoMo's dialogue ids, as :func:`tiermem.bench.metrics.evidence_recall`
compares them). Only the headline questions (with evidence, not adversarial) are asked unless
``categories`` names others. Every relevant candidate of the pool is kept; the others are the hard
negatives, all of them or ``negatives`` per question drawn with a seeded generator.

The split is the benchmarks' own, by position in the file modulo ten
(:mod:`tiermem.bench.datasets.splits`): 0-6 train, 7 tune, 8-9 test.

>>> keep([False, True, False, False, True], negatives=1, rng=random.Random(0))
[1, 2, 4]
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from tiermem.bench.datasets import load_dataset
from tiermem.bench.datasets.conversation import Conversation, Question
from tiermem.bench.datasets.splits import check_split, fold_of, split_items
from tiermem.bench.embed_cache import CachedEmbedder
from tiermem.bench.systems import ingested
from tiermem.components import Components
from tiermem.config import EmbedderConfig, TiermemConfig
from tiermem.embedding import Embedder, build_embedder
from tiermem.pipeline.read import run_search
from tiermem.render import render_memory
from tiermem.roles.plan import Candidate, Selection, TopKSelector
from tiermem.slm.base import ChatMessage
from tiermem.slm.prompts import relevance
from tiermem.slm.roles import cross_encoder
from tiermem.training import TrainingInputError
from tiermem.types import SearchFilters

_T = TypeVar("_T")
# The CLI's cap on negatives per question for the train split (about one positive in four
# examples there); tune and test keep the whole pool, as the selector meets it.
TRAIN_NEGATIVES = 4


@dataclass(frozen=True, slots=True)
class DatasetConfig:
    """``k``: the hits the search asks for (the benchmark's ``-k``); the pool the selector
    sees is ``candidate_multiplier * k``. ``negatives``: per question, ``None`` keeps all.
    ``categories``: the questions kept, by category or question-type name; ``None`` (the
    default) keeps the benchmark's headline ones, with evidence and not adversarial
    (adversarial questions ask about what was never said, and their "evidence" is the turn
    that says something else). ``questions``: the first ones of each conversation only,
    counted before the category filter (quick runs, tests)."""

    data: Path
    split: str = "train"
    k: int = 10
    negatives: int | None = None
    seed: int = 0
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    questions: int | None = None
    categories: tuple[str, ...] | None = None
    embed_cache: Path | None = None  # memoised vectors (``bench locomo --embed-cache``)

    def asks(self, question: Question) -> bool:
        """Whether ``question`` is one of those kept."""
        if self.categories is None:
            return question.headline
        return question.category in self.categories or question.group in self.categories


@dataclass(frozen=True, slots=True)
class ExampleMeta:
    split: str  # the conversation's fold: train, tune or test
    sample_id: str
    conversation: int  # position in the file
    question_index: int  # position in the conversation's qa list
    category: str
    candidate_id: str
    rank: int  # 0-based, in the first stage's order
    pool_size: int
    label: bool
    source_turns: tuple[str, ...]
    evidence: tuple[str, ...]
    prompt_version: str
    question_type: str | None = None


@dataclass(frozen=True, slots=True)
class Example:
    """One (question, candidate) prompt and the answer it teaches. ``pair`` is what a
    cross-encoder reads of the same example: the question and the rendered candidate
    (``None`` in a file written before it was recorded)."""

    messages: tuple[ChatMessage, ...]
    target: str
    meta: ExampleMeta
    pair: tuple[str, str] | None = None

    def to_json(self) -> str:
        return json.dumps(
            {
                "messages": [{"role": m.role, "content": m.content} for m in self.messages],
                "target": self.target,
                "meta": asdict(self.meta),
                "pair": list(self.pair) if self.pair else None,
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, line: str) -> Example:
        raw = json.loads(line)
        meta = dict(raw["meta"])
        meta["source_turns"] = tuple(meta["source_turns"])
        meta["evidence"] = tuple(meta["evidence"])
        pair = raw.get("pair")
        return cls(
            tuple(ChatMessage(m["role"], m["content"]) for m in raw["messages"]),
            str(raw["target"]),
            ExampleMeta(**meta),
            (str(pair[0]), str(pair[1])) if pair else None,
        )


@dataclass
class DatasetStats:
    conversations: int = 0
    questions: int = 0
    examples: int = 0
    positives: int = 0
    questions_with_evidence_in_pool: int = 0


class PoolRecorder:
    """A selector that keeps what the first stage hands it and passes the top ``k`` on, so
    ``run_search`` runs unchanged and the pool is the one a serving selector gets."""

    name = "pool-recorder"

    def __init__(self) -> None:
        self.pools: list[list[Candidate]] = []

    def select(self, queries: Sequence[str], candidates: Sequence[Candidate], k: int) -> Selection:
        self.pools.append(list(candidates))
        return TopKSelector().select(queries, candidates, k)


def candidate_pool(c: Components, user_id: str, question: str, k: int) -> list[Candidate]:
    """The candidates the read path hands its selector for ``question`` at ``k``."""
    recorder = PoolRecorder()
    run_search(replace(c, selector=recorder), user_id, question, k, SearchFilters())
    return recorder.pools[-1] if recorder.pools else []


def is_relevant(candidate: Candidate, evidence: Iterable[str]) -> bool:
    """A candidate is evidence when one of its source turns is a gold turn."""
    return not set(candidate.source_turn_ids).isdisjoint(evidence)


def keep(labels: Sequence[bool], negatives: int | None, rng: random.Random) -> list[int]:
    """Positions kept: every relevant one, and ``negatives`` of the rest drawn by ``rng``
    (all of them when ``negatives`` is ``None``), in pool order."""
    pos = [i for i, label in enumerate(labels) if label]
    neg = [i for i, label in enumerate(labels) if not label]
    if negatives is not None and len(neg) > negatives:
        neg = rng.sample(neg, negatives)
    return sorted(pos + neg)


def render_example(question: str, candidate: Candidate) -> tuple[ChatMessage, ...]:
    """The prompt the pointwise selector sends for this candidate."""
    inp = relevance.RelevanceInput(question, render_memory(candidate.item))
    return tuple(relevance.build_messages(inp))


def question_examples(
    c: Components,
    position: int,
    sample: Conversation,
    index: int,
    question: Question,
    config: DatasetConfig,
) -> list[Example]:
    pool = candidate_pool(c, sample.sample_id, question.question, config.k)
    labels = [is_relevant(cand, question.evidence) for cand in pool]
    rng = random.Random(f"{config.seed}/{sample.sample_id}/{index}")
    out = []
    for rank in keep(labels, config.negatives, rng):
        cand = pool[rank]
        meta = ExampleMeta(
            split=fold_of(position),
            sample_id=sample.sample_id,
            conversation=position,
            question_index=index,
            category=question.category,
            candidate_id=cand.id,
            rank=rank,
            pool_size=len(pool),
            label=labels[rank],
            source_turns=cand.source_turn_ids,
            evidence=question.evidence,
            prompt_version=relevance.VERSION,
            question_type=question.question_type,
        )
        messages = render_example(question.question, cand)
        pair = cross_encoder.pair(question.question, cand)
        out.append(Example(messages, relevance.target(labels[rank]), meta, pair))
    return out


def conversation_examples(
    position: int, sample: Conversation, config: DatasetConfig, embedder: Embedder | None = None
) -> Iterator[list[Example]]:
    """Per question, its examples (an empty list when the pool is empty). ``embedder``: the
    build's cached one; ``None``, the config's own."""
    with ingested(sample, TiermemConfig(embedder=config.embedder), embedder) as memory:
        questions = sample.questions[: config.questions] if config.questions else sample.questions
        for index, question in enumerate(questions):
            if not config.asks(question):
                continue
            yield question_examples(memory.components, position, sample, index, question, config)


def build_examples(
    config: DatasetConfig, on_conversation: Callable[[str], None] | None = None
) -> Iterator[list[Example]]:
    """Every question's examples, conversation after conversation, in file order. Each
    conversation is ingested afresh in a temporary folder, so two builds are the same."""
    check_split(config.split)
    samples, _quirks = load_dataset(config.data)
    cache = config.embed_cache
    embedder = CachedEmbedder(build_embedder(config.embedder), cache) if cache else None
    try:
        for position, sample in split_items(samples, config.split):
            if on_conversation is not None:
                on_conversation(sample.sample_id)
            yield from conversation_examples(position, sample, config, embedder)
    finally:
        if embedder is not None:
            embedder.close()


def write_dataset(
    config: DatasetConfig, out: Path, on_conversation: Callable[[str], None] | None = None
) -> DatasetStats:
    """Write the split's examples as JSONL (one example a line) and count them."""
    stats = DatasetStats()

    def started(sample_id: str) -> None:
        stats.conversations += 1
        if on_conversation is not None:
            on_conversation(sample_id)

    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with partial.open("w", encoding="utf-8") as handle:
        for examples in build_examples(config, started):
            stats.questions += 1
            stats.questions_with_evidence_in_pool += any(e.meta.label for e in examples)
            for example in examples:
                handle.write(example.to_json() + "\n")
                stats.examples += 1
                stats.positives += example.meta.label
    partial.replace(out)
    return stats


def read_examples(path: Path) -> list[Example]:
    """The examples of a JSONL file written by :func:`write_dataset`."""
    return read_lines(path, Example.from_json, "a tiermem training set")


def read_lines(path: Path, parse: Callable[[str], _T], what: str) -> list[_T]:
    """Each non-blank line of ``path`` parsed; a missing or malformed file is a
    ``TrainingInputError`` saying it is not ``what``."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise TrainingInputError(f"dataset {path} does not exist") from exc
    try:
        return [parse(line) for line in lines if line.strip()]
    except (ValueError, KeyError, TypeError) as exc:
        raise TrainingInputError(f"{path} is not {what}: {exc}") from exc


__all__ = [
    "TRAIN_NEGATIVES",
    "DatasetConfig",
    "DatasetStats",
    "Example",
    "ExampleMeta",
    "PoolRecorder",
    "build_examples",
    "candidate_pool",
    "is_relevant",
    "keep",
    "read_examples",
    "write_dataset",
]
