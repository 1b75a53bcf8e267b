"""The collaborators of one ``Memory``, built once and passed around as one frozen bundle."""

from __future__ import annotations

from dataclasses import dataclass

from tiermem.clock import Clock, SystemClock
from tiermem.config import TiermemConfig
from tiermem.embedding import Embedder, build_embedder
from tiermem.generator import ExtractiveGenerator, Generator
from tiermem.journal import Journal
from tiermem.pipeline.extract import EntryExtractor, TurnExtractor
from tiermem.pipeline.plan import PassthroughPlanner, Planner, Selector, TopKSelector
from tiermem.stm import ShortTermMemory
from tiermem.stores import MTMStore, build_mtm_store
from tiermem.tokens import ApproxTokenCounter, TokenCounter


@dataclass(frozen=True, slots=True)
class Components:
    embedder: Embedder
    store: MTMStore
    journal: Journal
    stm: ShortTermMemory
    extractor: EntryExtractor
    planner: Planner
    selector: Selector
    generator: Generator
    tokens: TokenCounter
    clock: Clock


def build_components(config: TiermemConfig, clock: Clock | None = None) -> Components:
    """Build every collaborator that ``config`` names. Models load lazily, on first use."""
    embedder = build_embedder(config.embedder)
    tokens = ApproxTokenCounter()
    store = build_mtm_store(config.mtm, embedder.dim)
    try:
        journal = Journal(config.journal.path)
    except BaseException:
        store.close()
        raise
    return Components(
        embedder=embedder,
        store=store,
        journal=journal,
        stm=ShortTermMemory(config.stm, tokens),
        extractor=TurnExtractor(),
        planner=PassthroughPlanner(),
        selector=TopKSelector(),
        generator=ExtractiveGenerator(),
        tokens=tokens,
        clock=clock or SystemClock(),
    )
