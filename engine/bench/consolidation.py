"""``tiermem bench consolidation``: what offline consolidation costs and what LTM adds.

1. Ingest the first ``sessions`` sessions of one LoCoMo conversation (model-free online path),
   then consolidate them in runs of ``batch_size`` entries with the configured model:
   seconds, prompt/completion tokens and graph growth per run, nodes per 100 turns.
2. Ingest ``later`` more sessions without consolidating them (the update gap).
3. Ask the questions whose evidence lies in those sessions, three ways, same questions, same
   run: MTM only (the baseline), LTM only, both (tiermem's read path with LTM on). Reported per
   question group (consolidated sessions / not yet consolidated): evidence recall (source
   turns delivered; LTM knowledge has none by design) and answer coverage (share of the gold
   answer's normalised tokens present in the delivered text - the one measure that can credit
   de-identified knowledge).
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from rich.console import Console
from rich.table import Table
from tiermem.bench.datasets import load_dataset
from tiermem.bench.datasets.conversation import Conversation, Question, session_messages
from tiermem.bench.metrics import evidence_recall, normalize_answer
from tiermem.bench.stats import percentile
from tiermem.clock import ManualClock
from tiermem.config import (
    ConsolidationConfig,
    LlamaCppConfig,
    LTMConfig,
    TiermemConfig,
    merge_overrides,
)
from tiermem.embedding.base import EmbedMode
from tiermem.memory import Memory
from tiermem.pipeline.read import run_search
from tiermem.render import render_memory
from tiermem.types import SearchFilters

PROBE_USER = "latency-probe"


# The per-run figures reported, as named in ``ConsolidationReport.summary()``.
RUN_COLUMNS = (
    "entries",
    "chunks",
    "invalid_chunks",
    "timed_out_chunks",
    "seconds",
    "prompt_tokens",
    "completion_tokens",
    "inserted",
    "merged",
    "updated",
    "dropped_identifiers",
    "nodes",
    "edges",
)


@dataclass(frozen=True, slots=True)
class GapRow:
    variant: str
    group: str
    questions: int
    recall: float
    coverage: float
    context_tokens: float


def answer_coverage(answer: str, delivered: str) -> float:
    """Share of the gold answer's normalised (stemmed) tokens found in the delivered text.

    >>> answer_coverage("the Lisbon bakery", "- Ines runs a bakery in Lisbon")
    1.0
    """
    gold = normalize_answer(answer).split()
    if not gold:
        return 0.0
    have = set(normalize_answer(delivered).split())
    return sum(t in have for t in gold) / len(gold)


def _config(
    data_dir: Path, model: str, batch_size: int, chunk_size: int, threads: int | None
) -> TiermemConfig:
    base = TiermemConfig.for_data_dir(data_dir)
    consolidation = ConsolidationConfig(
        backend=LlamaCppConfig(model=model, n_threads=threads),
        interval_minutes=0.0,  # runs are started here, one after another, and timed
        trigger_turns=1_000_000,
        batch_size=batch_size,
        chunk_size=chunk_size,
    )
    ltm = LTMConfig(
        enabled=True,
        path=data_dir / "ltm",
        secret=SecretStr("b3" * 16),
        consolidation=consolidation,
    )
    return base.model_copy(update={"ltm": ltm})


def _questions(sample: Conversation, turn_ids: set[str], limit: int) -> list[Question]:
    return [q for q in sample.questions if q.headline and set(q.evidence) <= turn_ids][:limit]


def _ask(
    memory: Memory, user: str, questions: Sequence[Question], k: int, variant: str
) -> tuple[list[float], list[float], list[int]]:
    c = memory.components
    recalls, coverage, tokens = [], [], []
    for q in questions:
        if variant == "LTM only":
            assert c.ltm is not None
            vector = c.embedder.embed([q.question], EmbedMode.QUERY)[0]
            texts = [f.text for f in c.ltm.search(vector, k, c.clock.now())]
            turns: set[str] = set()
        else:
            comps = replace(c, ltm=None) if variant == "MTM only" else c
            hits = run_search(comps, user, q.question, k, SearchFilters())
            turns = {t for h in hits for t in h.source_turn_ids}
            texts = [render_memory(h.item) for h in hits]
        delivered = "\n".join(texts)
        recalls.append(evidence_recall(q.evidence, turns))
        coverage.append(answer_coverage(q.answer, delivered))
        tokens.append(c.tokens.count(delivered))
    return recalls, coverage, tokens


def run(
    data: Path,
    conversation: int,
    sessions: int,
    later: int,
    model: str,
    questions: int,
    k: int,
    batch_size: int,
    chunk_size: int,
    out: Path | None,
    console: Console,
    threads: int | None = 1,
    probes: int = 25,
    overrides: dict[str, Any] | None = None,
    prepare: Callable[[Memory], None] | None = None,
) -> dict[str, Any]:
    """``overrides`` (config sections) and ``prepare`` (called with the new memory) let a
    test run the suite on a hash embedder and a scripted model."""
    samples, _ = load_dataset(data)
    sample = samples[conversation]
    user = sample.sample_id
    first = next(s.date for s in sample.sessions if s.date)
    assert first is not None
    clock = ManualClock(first)
    with tempfile.TemporaryDirectory(prefix="tiermem-consolidation-") as tmp:
        config = _config(Path(tmp), model, batch_size, chunk_size, threads)
        if overrides:
            config = merge_overrides(config, overrides)
        memory = Memory(config, clock=clock)
        if prepare is not None:
            prepare(memory)
        consolidated: set[str] = set()
        for session in sample.sessions[:sessions]:
            clock.set(session.date or clock.now())
            memory.add(session_messages(session, clock.now()), user, f"s{session.index}")
            consolidated |= {t.turn_id for t in session.turns}
        turns = len(consolidated)
        console.print(f"{user}: {turns} turns in {sessions} sessions; consolidating with {model}")
        runs: list[dict[str, Any]] = []
        idle_ms = _probe_adds(memory, probes, lambda: True)
        started = time.perf_counter()
        latency: dict[str, Any] = {"idle_ms": idle_ms}
        while True:
            if not runs:  # the first run goes in the background; add() is timed meanwhile
                box: dict[str, Any] = {}
                worker = threading.Thread(
                    target=lambda box=box: box.setdefault("r", memory.consolidate_now(user))
                )
                worker.start()
                latency["during_run_ms"] = _probe_adds(memory, probes, worker.is_alive)
                worker.join()
                r = box["r"]
            else:
                r = memory.consolidate_now(user)
            if r.entries == 0:
                break
            s = r.summary()
            runs.append({"run": len(runs) + 1, **{c: s[c] for c in RUN_COLUMNS}})
            console.print(f"run {len(runs)}: {s}")
        total_s = time.perf_counter() - started
        fresh: set[str] = set()
        for session in sample.sessions[sessions : sessions + later]:
            clock.set(session.date or clock.now())
            memory.add(session_messages(session, clock.now()), user, f"s{session.index}")
            fresh |= {t.turn_id for t in session.turns}
        gap: list[GapRow] = []
        groups = {
            "consolidated": _questions(sample, consolidated, questions),
            "not yet consolidated": _questions(sample, fresh, questions),
        }
        for group, asked in groups.items():
            for variant in ("MTM only", "LTM only", "both"):
                recalls, cover, tokens = _ask(memory, user, asked, k, variant)
                n = max(1, len(asked))
                gap.append(
                    GapRow(
                        variant,
                        group,
                        len(asked),
                        sum(recalls) / n,
                        sum(cover) / n,
                        sum(tokens) / n,
                    )
                )
        ltm = memory.components.ltm
        assert ltm is not None
        facts = ltm.inventory(clock.now())
        meter = memory.meter.snapshot().get("consolidator", {})
        memory.close()
    nodes = sum(1 for f in facts if f.id.startswith("n:"))
    result = {
        "conversation": user,
        "model": model,
        "turns": turns,
        "sessions": sessions,
        "batch_size": batch_size,
        "chunk_size": chunk_size,
        "runs": runs,
        "seconds_total": total_s,
        "nodes": nodes,
        "edges": len(facts) - nodes,
        "nodes_per_100_turns": 100 * nodes / max(1, turns),
        "meter": meter,
        "update_gap": [asdict(g) for g in gap],
        "threads": threads,
        "add_latency": {
            name: {"n": len(v), "p50_ms": percentile(v, 50), "p95_ms": percentile(v, 95)}
            for name, v in latency.items()
            if v
        },
        "sample_facts": [f.text for f in sorted(facts, key=lambda f: -f.evidence)[:15]],
        "k": k,
    }
    _print(result, runs, gap, k, console)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "consolidation.json").write_text(json.dumps(result, indent=2, default=str))
    return result


def _probe_adds(memory: Memory, n: int, go_on: Callable[[], bool]) -> list[float]:
    """Time ``add()`` of one short turn for a throwaway user, up to ``n`` times while
    ``go_on()`` holds; the user is erased afterwards."""
    out: list[float] = []
    for i in range(n):
        if not go_on():
            break
        started = time.perf_counter()
        memory.add(
            [{"role": "user", "content": f"probe {i}: the weather turned {i % 7} degrees colder"}],
            PROBE_USER,
        )
        out.append((time.perf_counter() - started) * 1000)
    memory.forget_user(PROBE_USER)
    return out


def _print(
    result: dict[str, Any],
    runs: Sequence[dict[str, Any]],
    gap: Sequence[GapRow],
    k: int,
    console: Console,
) -> None:
    table = Table(title=f"Consolidation runs on {result['conversation']} ({result['model']})")
    for col in ("run", *RUN_COLUMNS):
        table.add_column(col.replace("_", " "), justify="right")
    for r in runs:
        table.add_row(*(f"{v:.1f}" if isinstance(v, float) else str(v) for v in r.values()))
    console.print(table)
    for name, v in result["add_latency"].items():
        console.print(
            f"add() {name.removesuffix('_ms')}: n={v['n']}, p50 {v['p50_ms']:.1f} ms, "
            f"p95 {v['p95_ms']:.1f} ms (consolidation model threads: {result['threads'] or 'all'})"
        )
    console.print(
        f"{result['nodes']} nodes, {result['edges']} edges from {result['turns']} turns: "
        f"{result['nodes_per_100_turns']:.1f} nodes per 100 turns; {result['seconds_total']:.0f} s"
    )
    t = Table(title=f"Update gap, k={k} (MTM only is the baseline)")
    columns = ("from", "variant", "questions", "evidence recall", "answer coverage", "tokens")
    for col in columns:
        t.add_column(col, justify="right")
    for g in gap:
        t.add_row(
            g.group,
            g.variant,
            str(g.questions),
            f"{g.recall:.1%}",
            f"{g.coverage:.1%}",
            f"{g.context_tokens:.0f}",
        )
    console.print(t)
