"""``tiermem bench mtm``: ``add()`` and ``search()`` latency at growing MTM sizes.

For each size, one user's MTM is filled with synthetic, varied turns (untimed), then single
``add()`` calls (one new turn each) and ``search()`` calls are timed. The same run measures
the exact in-memory reference store as the baseline, through the same ``Memory`` API and the
same embedder, so the ratio isolates what the Qdrant store costs.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from rich.console import Console
from rich.table import Table
from tiermem.bench.stats import percentile
from tiermem.config import MTMConfig, TiermemConfig
from tiermem.embedding import EmbedMode
from tiermem.memory import Memory

_A = TypeVar("_A")
_SUBJECTS = (
    "my sister",
    "my landlord",
    "the team",
    "our neighbour",
    "my coach",
    "the vet",
    "my daughter",
    "the bakery",
    "my manager",
    "the choir",
)
_VERBS = (
    "booked",
    "cancelled",
    "recommended",
    "paid for",
    "moved",
    "repaired",
    "painted",
    "borrowed",
    "returned",
    "planned",
)
_OBJECTS = (
    "a trip to Porto",
    "the blue bicycle",
    "a cello lesson",
    "the garden shed",
    "dinner at Nobu",
    "a flight to Oslo",
    "the kitchen tiles",
    "a jazz concert",
    "the marathon entry",
    "a pottery class",
    "the dentist visit",
    "a tent",
)
_WHEN = (
    "last Monday",
    "in March",
    "next week",
    "on the 14th",
    "after the holidays",
    "this morning",
    "two years ago",
    "before the exam",
)
_QUERIES = (
    "when is the flight to Oslo",
    "who repaired the bicycle",
    "what did my sister plan",
    "the jazz concert tickets",
    "did anyone paint the shed",
    "dentist appointment",
    "what did the coach recommend",
    "pottery class price",
)


def synthetic_turns(count: int, seed: int, start: datetime) -> list[dict[str, object]]:
    rng = random.Random(seed)
    return [
        {
            "role": "user",
            "speaker": "Sam",
            "content": f"{rng.choice(_SUBJECTS).capitalize()} {rng.choice(_VERBS)} "
            f"{rng.choice(_OBJECTS)} {rng.choice(_WHEN)} (note {seed}-{i}).",
            "timestamp": start + timedelta(minutes=i),
        }
        for i in range(count)
    ]


@dataclass(frozen=True, slots=True)
class Row:
    store: str
    entries: int
    add_p50_ms: float
    add_p95_ms: float
    search_p50_ms: float
    search_p95_ms: float
    embed_query_p50_ms: float
    fill_s: float


def _timed(call: Callable[[_A], object], arguments: Sequence[_A]) -> list[float]:
    """Milliseconds of ``call(a)`` for each argument, one after another."""
    samples = []
    for argument in arguments:
        started = time.perf_counter()
        call(argument)
        samples.append((time.perf_counter() - started) * 1000.0)
    return samples


def measure(config: TiermemConfig, label: str, size: int, samples: int) -> Row:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    with Memory(config) as memory:
        began = time.perf_counter()
        fill = synthetic_turns(size, seed=1, start=start)
        for i in range(0, size, 250):
            memory.add(fill[i : i + 250], user_id="sam", session_id=f"fill-{i // 250}")
        fill_s = time.perf_counter() - began
        memory.search("warm up", "sam", k=10)
        extra = synthetic_turns(samples, seed=2, start=start + timedelta(days=400))
        add_ms = _timed(lambda m: memory.add([m], user_id="sam"), extra)
        queries = [_QUERIES[i % len(_QUERIES)] for i in range(samples)]
        search_ms = _timed(lambda q: memory.search(q, "sam", k=10), queries)
        embedder = memory.components.embedder
        embed_ms = _timed(lambda q: embedder.embed([q], EmbedMode.QUERY), queries)
    return Row(
        label,
        size,
        percentile(add_ms, 50),
        percentile(add_ms, 95),
        percentile(search_ms, 50),
        percentile(search_ms, 95),
        percentile(embed_ms, 50),
        fill_s,
    )


def _config(root: Path, embedder: str, location: str) -> TiermemConfig:
    config = TiermemConfig.for_data_dir(root)
    mtm = (
        MTMConfig(location="path", path=root / "qdrant")
        if location == "path"
        else MTMConfig(location="reference")
    )
    return config.model_copy(
        update={"mtm": mtm, "embedder": config.embedder.model_copy(update={"provider": embedder})}
    )


def main(
    sizes: Sequence[int], samples: int, embedder: str, out: Path | None, console: Console
) -> list[Row]:
    rows: list[Row] = []
    for size in sizes:
        for label, location in (("qdrant-embedded", "path"), ("exact-reference", "reference")):
            with tempfile.TemporaryDirectory(prefix="tiermem-bench-") as tmp:
                console.print(f"filling {label} with {size} entries ...")
                rows.append(measure(_config(Path(tmp), embedder, location), label, size, samples))
    table = Table(title=f"MTM latency, one user, embedder={embedder}, {samples} calls each")
    for column in (
        "store",
        "entries",
        "add p50 ms",
        "add p95 ms",
        "search p50 ms",
        "search p95 ms",
        "query embed p50 ms",
        "search p50 vs reference",
        "fill s",
    ):
        table.add_column(column, justify="right")
    baseline = {r.entries: r for r in rows if r.store == "exact-reference"}
    for r in rows:
        ratio = r.search_p50_ms / baseline[r.entries].search_p50_ms
        table.add_row(
            r.store,
            str(r.entries),
            f"{r.add_p50_ms:.2f}",
            f"{r.add_p95_ms:.2f}",
            f"{r.search_p50_ms:.2f}",
            f"{r.search_p95_ms:.2f}",
            f"{r.embed_query_p50_ms:.2f}",
            f"{ratio:.2f}x",
            f"{r.fill_s:.1f}",
        )
    console.print(table)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    return rows
