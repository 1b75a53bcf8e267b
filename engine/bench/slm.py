"""``tiermem bench slm``: what the online SLM roles cost and how reliably they answer.

One LoCoMo-format conversation is ingested through the full online path (rules + writer),
then the headline questions (with evidence, not adversarial) go through controller, selector
and generator. Reported per role: calls, JSON validity (schema-valid outputs / calls),
fallbacks, guard events, latency p50/p95; for ingestion: model calls and tokens per ingested
turn. The model-free path (verbatim turns, plain query, fused order) runs on the same
questions in the same run as the baseline, with the evidence recall of both: the share of
gold evidence turns among the source turns of the memories delivered.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tiermem.bench.datasets import load_dataset
from tiermem.bench.datasets.conversation import Conversation, session_messages
from tiermem.bench.metrics import evidence_recall
from tiermem.bench.stats import percentile
from tiermem.config import GeneratorConfig, LlamaCppConfig, SLMConfig, TiermemConfig
from tiermem.memory import Memory

ROLES = ("writer", "controller", "selector", "generator")


@dataclass(frozen=True, slots=True)
class PathResult:
    label: str
    ingest_s: float
    turns: int
    entries: int
    recall: float
    context_tokens: float
    question_s_p50: float
    meter: dict[str, dict[str, Any]]


def run_path(
    sample: Conversation, config: TiermemConfig, label: str, questions: int, k: int
) -> PathResult:
    user = sample.sample_id
    with Memory(config) as memory:
        started = time.perf_counter()
        fallback = sample.sessions[0].date
        assert fallback is not None
        entries = 0
        for session in sample.sessions:
            result = memory.add(session_messages(session, fallback), user, f"s{session.index}")
            entries += len(result.entries)
            fallback = session.date or fallback
        ingest_s = time.perf_counter() - started
        asked = [q for q in sample.questions if q.headline]
        recalls, tokens, latencies = [], [], []
        for q in asked[:questions]:
            began = time.perf_counter()
            answer = memory.answer(q.question, user)
            latencies.append(time.perf_counter() - began)
            delivered = {t for h in answer.hits[:k] for t in h.source_turn_ids}
            recalls.append(evidence_recall(q.evidence, delivered))
            tokens.append(answer.context_tokens)
        meter = memory.components.meter.snapshot()
    return PathResult(
        label,
        ingest_s,
        sample.turn_count,
        entries,
        sum(recalls) / max(1, len(recalls)),
        sum(tokens) / max(1, len(tokens)),
        percentile(latencies, 50) if latencies else 0.0,
        meter,
    )


def _config(root: Path, model: str | None, k: int) -> TiermemConfig:
    config = TiermemConfig.for_data_dir(root)
    slm = SLMConfig()
    if model:  # every role as measured (tiermem.presets): the selector listwise, not fusion
        slm = SLMConfig(backend=LlamaCppConfig(model=model), selector_mode="listwise")
    return config.model_copy(
        update={
            "slm": slm,
            "generator": GeneratorConfig(kind="model" if model else "extractive", max_memories=k),
        }
    )


def _role_table(result: PathResult) -> Table:
    table = Table(title=f"{result.label}: per role")
    for column in (
        "role",
        "calls",
        "valid",
        "JSON validity",
        "timeouts",
        "fallbacks",
        "events",
        "p50 s",
        "p95 s",
        "prompt tok/call",
        "completion tok/call",
    ):
        table.add_column(column, justify="right")
    for role in ROLES:
        s = result.meter.get(role)
        if not s or not s["calls"]:
            continue
        lat = s["latencies_s"]
        table.add_row(
            role,
            str(s["calls"]),
            str(s["ok"]),
            f"{s['ok'] / s['calls']:.1%}",
            str(s["timeouts"]),
            str(s["fallbacks"]),
            json.dumps(s["events"]) or "",
            f"{percentile(lat, 50):.2f}",
            f"{percentile(lat, 95):.2f}",
            f"{s['prompt_tokens'] / s['calls']:.0f}",
            f"{s['completion_tokens'] / s['calls']:.0f}",
        )
    return table


def main(
    data: Path,
    conversation: int,
    model: str,
    questions: int,
    k: int,
    out: Path | None,
    console: Console,
) -> list[PathResult]:
    samples, _ = load_dataset(data)
    sample = samples[conversation]
    results = []
    for label, chosen in ((f"slm ({model})", model), ("model-free baseline", None)):
        with tempfile.TemporaryDirectory(prefix="tiermem-bench-slm-") as tmp:
            console.print(f"{label}: ingesting {sample.sample_id} ({sample.turn_count} turns)")
            results.append(run_path(sample, _config(Path(tmp), chosen, k), label, questions, k))
    summary = Table(
        title=f"{sample.sample_id}: ingestion cost and evidence recall, k={k}, "
        f"{questions} headline questions"
    )
    for column in (
        "path",
        "ingest s",
        "entries",
        "writer calls/turn",
        "prompt tok/turn",
        "completion tok/turn",
        f"recall@{k}",
        "context tokens",
        "answer p50 s",
    ):
        summary.add_column(column, justify="right")
    for r in results:
        writer = r.meter.get("writer", {})
        summary.add_row(
            r.label,
            f"{r.ingest_s:.0f}",
            str(r.entries),
            f"{writer.get('calls', 0) / r.turns:.3f}",
            f"{writer.get('prompt_tokens', 0) / r.turns:.0f}",
            f"{writer.get('completion_tokens', 0) / r.turns:.0f}",
            f"{r.recall:.1%}",
            f"{r.context_tokens:.0f}",
            f"{r.question_s_p50:.2f}",
        )
    console.print(summary)
    console.print(_role_table(results[0]))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps([asdict(r) for r in results], indent=2, default=str))
    return results
