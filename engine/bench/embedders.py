"""``tiermem bench embedders``: what each embedder costs to write and query with, on real turns.

For each data file, the first ``turns`` turns (conversation and session order, as the file
holds them) are embedded as documents by each embedder in its own batches, after one warm-up
call that loads the model (timed apart, as ``load``). Then the same turns are written through
``Memory.add`` into a fresh embedded default with that embedder (one call per session, so
what ``add()`` embeds besides the turns, exchanges and burst units, is counted), and
``queries`` of the file's questions are embedded one at a time, as ``context()`` does. The
default embedder (all-MiniLM-L6-v2) is always the first row: the baseline of the same run.
Recall per embedder is ``tiermem bench locomo --config`` with the embedder in the file.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table
from tiermem.bench import BenchInputError
from tiermem.bench.datasets import load_dataset
from tiermem.bench.datasets.conversation import Conversation, Session, session_messages
from tiermem.bench.stats import percentile
from tiermem.config import EmbedderConfig, TiermemConfig
from tiermem.embedding import EmbedMode, build_embedder
from tiermem.memory import Memory

_EPOCH = datetime(2023, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Row:
    dataset: str
    embedder: str
    dim: int
    turns: int
    chars_per_turn: float
    load_s: float
    embed_s_per_1000: float  # the turns alone, as documents
    add_s_per_1000: float  # Memory.add of the same turns, all it embeds and stores
    query_p50_ms: float
    query_p95_ms: float


def _sessions(conversations: Sequence[Conversation], turns: int) -> list[tuple[str, Session]]:
    """The first ``turns`` turns as (user, session) pieces, the last one cut short."""
    out: list[tuple[str, Session]] = []
    left = turns
    for conversation in conversations:
        for session in conversation.sessions:
            if left <= 0:
                return out
            kept = session.turns[:left]
            if kept:
                out.append((conversation.sample_id, Session(session.index, session.date, kept)))
                left -= len(kept)
    return out


def measure(
    name: str,
    conversations: Sequence[Conversation],
    config: EmbedderConfig,
    turns: int,
    queries: int,
) -> Row:
    """One embedder's row on one data set."""
    pieces = _sessions(conversations, turns)
    texts = [t.text for _, s in pieces for t in s.turns if t.text]
    if not texts:
        raise BenchInputError(f"{name}: no turns with text to embed")
    questions = [q.question for c in conversations for q in c.questions][:queries]
    embedder = build_embedder(config)
    started = time.perf_counter()
    embedder.embed(["warm-up"], EmbedMode.DOCUMENT)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    embedder.embed(texts, EmbedMode.DOCUMENT)
    embed_s = time.perf_counter() - started
    timings = []
    for question in questions:
        started = time.perf_counter()
        embedder.embed([question], EmbedMode.QUERY)
        timings.append(time.perf_counter() - started)
    with tempfile.TemporaryDirectory(prefix="tiermem-embed-bench-") as root:
        memory_config = TiermemConfig.for_data_dir(root).model_copy(update={"embedder": config})
        with Memory(memory_config) as memory:
            memory.add(session_messages(pieces[0][1], _EPOCH)[:1], "warmup")  # loads it here
            started = time.perf_counter()
            for user, session in pieces:
                memory.add(session_messages(session, _EPOCH), user, f"s{session.index}")
            add_s = time.perf_counter() - started
    count = sum(len(s.turns) for _, s in pieces)
    return Row(
        dataset=name,
        embedder=embedder.name,
        dim=embedder.dim,
        turns=count,
        chars_per_turn=round(sum(map(len, texts)) / len(texts), 1),
        load_s=round(load_s, 2),
        embed_s_per_1000=round(embed_s * 1000 / len(texts), 2),
        add_s_per_1000=round(add_s * 1000 / count, 2),
        query_p50_ms=round(1000 * percentile(timings, 50), 1) if timings else float("nan"),
        query_p95_ms=round(1000 * percentile(timings, 95), 1) if timings else float("nan"),
    )


def main(
    data: Sequence[Path],
    configs: Sequence[EmbedderConfig],
    turns: int,
    queries: int,
    out: Path | None,
    console: Console,
    baseline: EmbedderConfig | None = None,
) -> list[Row]:
    """Every embedder of ``configs``, after ``baseline`` (the default embedder), on every file
    of ``data``."""
    if not data:
        raise BenchInputError("no data set: give --data FILE")
    first = baseline or EmbedderConfig()
    embedders = [first, *(c for c in configs if c != first)]
    rows: list[Row] = []
    for path in data:
        conversations, _quirks = load_dataset(path)
        table = Table(title=f"{path.stem}: first {turns} turns, {queries} queries")
        for column in ("embedder", "dim", "chars/turn", "load s", "embed s/1k turns"):
            table.add_column(column, justify="right")
        for column in ("add() s/1k turns", "query p50 ms", "p95 ms"):
            table.add_column(column, justify="right")
        for config in embedders:
            row = measure(path.stem, conversations, config, turns, queries)
            rows.append(row)
            table.add_row(
                row.embedder,
                str(row.dim),
                f"{row.chars_per_turn:.0f}",
                f"{row.load_s:.1f}",
                f"{row.embed_s_per_1000:.1f}",
                f"{row.add_s_per_1000:.1f}",
                f"{row.query_p50_ms:.1f}",
                f"{row.query_p95_ms:.1f}",
            )
        console.print(table)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    return rows
