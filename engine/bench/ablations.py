"""``tiermem bench ablations``: the seed paper's stress tests on a LoCoMo-format file.

- **MTM growth**: one conversation's memory padded with distractor entries (other
  conversations' turns, then synthetic filler) to about 100, 1,000, 5,000 and 10,000 entries;
  evidence recall and retrieval latency of tiermem's read path beside pure vector top-K on
  the same store, in the same run.
- **Error injection** (needs the SLM roles): 50% noise in the controller's queries, the
  selector removed, 50% noise in the writer's entries, and all three, each beside the clean
  configuration.
- **Update gap** (MTM only, LTM only, both), with ``--consolidation-model``: the first five
  sessions consolidated into LTM, two more left in MTM only (``tiermem.bench.consolidation``,
  also its own suite, ``tiermem bench consolidation``).
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tiermem.bench.datasets import load_dataset
from tiermem.bench.datasets.conversation import Conversation, Question, session_messages
from tiermem.bench.metrics import evidence_recall
from tiermem.bench.mtm import synthetic_turns
from tiermem.bench.stats import percentile
from tiermem.config import EmbedderConfig, LlamaCppConfig, SLMConfig, TiermemConfig
from tiermem.embedding.base import EmbedMode
from tiermem.memory import Memory
from tiermem.roles.plan import PlanIntent, PlannedQuery, Planner, TopKSelector
from tiermem.types import SearchFilters, Turn

GROWTH_SIZES = (100, 1_000, 5_000, 10_000)


@dataclass(frozen=True, slots=True)
class Row:
    experiment: str
    variant: str
    entries: int
    questions: int
    recall: float
    p50_ms: float
    p95_ms: float


def _questions(sample: Conversation, ingested: set[str], limit: int) -> list[Question]:
    usable = [q for q in sample.questions if q.headline and set(q.evidence) <= ingested]
    return usable[:limit]


def _measure(
    label: str,
    variant: str,
    memory: Memory,
    user: str,
    questions: Sequence[Question],
    k: int,
    dense_only: bool,
) -> Row:
    recalls, latencies = [], []
    c = memory.components
    for q in questions:
        started = time.perf_counter()
        if dense_only:
            vector = c.embedder.embed([q.question], EmbedMode.QUERY)[0]
            stored = c.store.search(user, vector, SearchFilters(), k)
            found = [s.entry.source_turn_ids for s in stored]
        else:
            found = [h.source_turn_ids for h in memory.search(q.question, user, k=k)]
        latencies.append((time.perf_counter() - started) * 1000)
        delivered = {t for turns in found for t in turns}
        recalls.append(evidence_recall(q.evidence, delivered))
    return Row(
        label,
        variant,
        c.store.count(user),
        len(questions),
        sum(recalls) / max(1, len(recalls)),
        percentile(latencies, 50),
        percentile(latencies, 95),
    )


def _distractors(
    samples: Sequence[Conversation], target: Conversation, count: int, start: datetime
) -> list[dict[str, Any]]:
    """Other conversations' turns (ids kept distinct), then synthetic filler."""
    out: list[dict[str, Any]] = []
    for other in samples:
        if other.sample_id == target.sample_id:
            continue
        for session in other.sessions:
            for message in session_messages(session, session.date or start):
                out.append({**message, "turn_id": f"{other.sample_id}/{message['turn_id']}"})
    out = out[:count]
    if len(out) < count:
        out += synthetic_turns(count - len(out), seed=7, start=start)
    return out


def mtm_growth(
    samples: Sequence[Conversation],
    sample: Conversation,
    config: TiermemConfig,
    sizes: Sequence[int],
    questions: int,
    k: int,
    console: Console,
) -> list[Row]:
    rows: list[Row] = []
    user = sample.sample_id
    first = next(s.date for s in sample.sessions if s.date)
    assert first is not None
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="tiermem-growth-") as tmp:
            cfg = TiermemConfig.for_data_dir(tmp)
            memory = Memory(config.model_copy(update={"mtm": cfg.mtm, "journal": cfg.journal}))
            ingested: set[str] = set()
            for session in sample.sessions:
                if len(ingested) + len(session.turns) > size:
                    break
                memory.add(
                    session_messages(session, session.date or first), user, f"s{session.index}"
                )
                ingested |= {t.turn_id for t in session.turns}
            padding = _distractors(samples, sample, size - len(ingested), first)
            for i in range(0, len(padding), 500):
                memory.add(padding[i : i + 500], user, f"pad{i // 500}")
            asked = _questions(sample, ingested, questions)
            console.print(
                f"growth {size}: {memory.components.store.count(user)} entries, "
                f"{len(asked)} questions"
            )
            rows.append(_measure("MTM growth", "tiermem", memory, user, asked, k, False))
            rows.append(_measure("MTM growth", "vector top-K", memory, user, asked, k, True))
            memory.close()
    return rows


class NoisyPlanner:
    """Replaces each query the controller wrote with an unrelated question, at ``rate``. The
    user's own query, which the plan always keeps first, is not the controller's output and
    is left alone: that protection is part of what this ablation measures."""

    name = "noisy-controller"

    def __init__(self, inner: Planner, noise: Sequence[str], rate: float, seed: int = 0) -> None:
        self._inner, self._noise, self._rate = inner, list(noise), rate
        self._rng = random.Random(seed)

    def plan(
        self, query: str, stm: Sequence[Turn], filters: SearchFilters, now: datetime
    ) -> PlanIntent:
        plan = self._inner.plan(query, stm, filters, now)
        queries = [
            q
            if i == 0 or self._rng.random() >= self._rate
            else PlannedQuery(self._rng.choice(self._noise), q.route, q.weight)
            for i, q in enumerate(plan.queries)
        ]
        return replace(plan, queries=tuple(queries))


def _noisy_writer_copy(
    source: Path, target: Path, user: str, config: TiermemConfig, noise: Sequence[str], rate: float
) -> Memory:
    """A copy of an ingested memory with ``rate`` of the writer's entries replaced by
    unrelated text (their provenance kept), as a writer emitting noise would leave it."""
    shutil.copytree(source, target)
    paths = TiermemConfig.for_data_dir(target)
    memory = Memory(config.model_copy(update={"mtm": paths.mtm, "journal": paths.journal}))
    rng = random.Random(1)
    for entry in memory.get_all(user):
        if entry.kind != "turn" and rng.random() < rate:
            memory.update(entry.id, rng.choice(noise), user)
    return memory


def error_injection(
    samples: Sequence[Conversation],
    sample: Conversation,
    model: str,
    questions: int,
    k: int,
    state: Path | None,
    console: Console,
) -> list[Row]:
    user = sample.sample_id
    noise = [q.question for s in samples if s.sample_id != user for q in s.questions]
    roles = SLMConfig(backend=LlamaCppConfig(model=model), selector_mode="listwise")
    base = TiermemConfig(slm=roles)  # every role, the selector listwise, as measured
    with tempfile.TemporaryDirectory(prefix="tiermem-errors-") as tmp:
        clean_dir = Path(tmp) / "clean"
        if state is not None:
            shutil.copytree(state, clean_dir)
        paths = TiermemConfig.for_data_dir(clean_dir)
        clean = Memory(base.model_copy(update={"mtm": paths.mtm, "journal": paths.journal}))
        first = next(s.date for s in sample.sessions if s.date)
        assert first is not None
        console.print(f"error injection: ingesting {user} with {model} (skipped if reused)")
        for session in sample.sessions:
            when = session.date or first + timedelta(days=session.index)
            clean.add(session_messages(session, when), user, f"s{session.index}")
        asked = _questions(sample, sample.turn_ids(), questions)
        c = clean.components  # the variants below share its store and journal
        variants = [
            ("clean", c),
            ("controller 50% noise", replace(c, planner=NoisyPlanner(c.planner, noise, 0.5))),
            ("selector removed", replace(c, selector=TopKSelector())),
        ]
        rows = [
            _measure("error injection", name, Memory(base, components=comp), user, asked, k, False)
            for name, comp in variants
        ]
        noisy = _noisy_writer_copy(clean_dir, Path(tmp) / "noisy", user, base, noise, 0.5)
        n = noisy.components
        for name, comp in (
            ("writer 50% noise", n),
            (
                "all three",
                replace(n, planner=NoisyPlanner(n.planner, noise, 0.5), selector=TopKSelector()),
            ),
        ):
            rows.append(
                _measure(
                    "error injection", name, Memory(base, components=comp), user, asked, k, False
                )
            )
        noisy.close()
        clean.close()
    return rows


def main(
    data: Path,
    conversation: int,
    questions: int,
    k: int,
    sizes: Sequence[int],
    model: str | None,
    state: Path | None,
    console: Console,
    consolidation_model: str | None = None,
) -> list[Row]:
    samples, _ = load_dataset(data)
    sample = samples[conversation]
    growth_config = TiermemConfig(embedder=EmbedderConfig())
    rows = mtm_growth(samples, sample, growth_config, sizes, questions, k, console)
    if model:
        rows += error_injection(samples, sample, model, questions, k, state, console)
    table = Table(title=f"Ablations on {sample.sample_id}, k={k}")
    for column in (
        "experiment",
        "variant",
        "entries",
        "questions",
        f"recall@{k}",
        "retrieval p50 ms",
        "retrieval p95 ms",
    ):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r.experiment,
            r.variant,
            str(r.entries),
            str(r.questions),
            f"{r.recall:.1%}",
            f"{r.p50_ms:.1f}",
            f"{r.p95_ms:.1f}",
        )
    console.print(table)
    if not model:
        console.print("error injection needs --model (the SLM roles); not run")
    if consolidation_model:
        from tiermem.bench.consolidation import run as update_gap

        update_gap(
            data,
            conversation,
            sessions=5,
            later=2,
            model=consolidation_model,
            questions=questions,
            k=k,
            batch_size=48,
            chunk_size=6,
            out=None,
            console=console,
        )
    else:
        console.print(
            "update gap (MTM only / LTM only / both) needs --consolidation-model "
            "(or `tiermem bench consolidation`); not run"
        )
    return rows
