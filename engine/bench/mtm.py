"""``tiermem bench mtm``: ``add()`` and ``context()`` cost as the memory grows.

For each size, ``users`` users' MTM is filled with ``size`` synthetic, varied turns each
(timed: the fill rate), the memory is closed and opened again (timed: what a restart costs,
and then its first search: a store that opens lazily pays there), then single ``add()`` calls
(one new turn each), ``search()`` and ``context()`` calls (1,200 tokens) are timed, each for
a random one of the users (one user: always it). Each timed call's store and journal calls
are counted; the process's resident memory is read after the restart and again after the
timed calls, and the store's files are measured on disk. The same run measures each store
kind (``STORES``: qdrant-client's embedded mode, Qdrant Edge shards, the same shards after
``tiermem optimize`` built their graphs (timed), and the exact in-memory reference store as
the baseline) through the same ``Memory`` API and the same embedder, so the ratio isolates
what a store costs. Each store at each size is filled in one process and
measured in the next, so its resident memory, open and first search are its own.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import resource
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

from rich.console import Console
from rich.table import Table
from tiermem.bench.stats import percentile
from tiermem.components import build_components
from tiermem.config import MTMConfig, QdrantConfig, ReferenceStoreConfig, TiermemConfig
from tiermem.config.stores import EdgeStoreConfig
from tiermem.embedding import EmbedMode
from tiermem.errors import InvalidInputError
from tiermem.journal import Journal
from tiermem.memory import Memory
from tiermem.stores.base import MTMStore
from tiermem.stores.edge import EdgeStore

_A = TypeVar("_A")
STORES = {
    "qdrant-embedded": "path",
    "qdrant-edge": "edge",
    "qdrant-edge-graph": "edge-graph",
    "exact-reference": "reference",
}
"""The stores one run measures, by the label its table gives them: where each lives."""
BASELINE = "exact-reference"
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
    users: int
    entries: int  # per user
    add_p50_ms: float
    add_p95_ms: float
    search_p50_ms: float
    search_p95_ms: float
    context_p50_ms: float
    context_p95_ms: float
    embed_query_p50_ms: float
    store_calls_per_add: float
    journal_calls_per_add: float
    store_calls_per_context: float
    journal_calls_per_context: float
    open_s: float
    rss_mib: float
    fill_s: float
    first_search_s: float = 0.0  # the first search after the restart
    rss_end_mib: float = 0.0  # after the timed calls
    disk_mib: float = 0.0  # the store's files after the fill (0: in memory)
    graph_s: float = 0.0  # ``tiermem optimize`` after the fill (edge-graph only)
    graph_indexed: int = 0  # the entries its graphs index (0: every shard under the threshold)


class CallCounter:
    """Stands in for a store or the journal and counts the calls made to it."""

    def __init__(self, inner: object) -> None:
        self._inner = inner
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if not callable(found):
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return found(*args, **kwargs)

        return counted


def _timed(call: Callable[[_A], object], arguments: Sequence[_A]) -> list[float]:
    """Milliseconds of ``call(a)`` for each argument, one after another."""
    samples = []
    for argument in arguments:
        started = time.perf_counter()
        call(argument)
        samples.append((time.perf_counter() - started) * 1000.0)
    return samples


def _counted(
    counters: tuple[CallCounter, CallCounter], call: Callable[[_A], object], arguments: Sequence[_A]
) -> tuple[list[float], float, float]:
    """``_timed``, and the mean store and journal calls per call."""
    before = [c.calls for c in counters]
    times = _timed(call, arguments)
    n = max(1, len(arguments))
    store, journal = ((c.calls - b) / n for c, b in zip(counters, before, strict=True))
    return times, store, journal


def _fill(config: TiermemConfig, users: int, size: int, start: datetime) -> float:
    began = time.perf_counter()
    with Memory(config) as memory:
        for u in range(users):
            fill = synthetic_turns(size, seed=1 + u, start=start)
            for i in range(0, size, 250):
                memory.add(fill[i : i + 250], user_id=f"sam-{u}", session_id=f"fill-{i // 250}")
    return time.perf_counter() - began


def _build_graphs(config: TiermemConfig) -> tuple[float, int]:
    """``tiermem optimize`` on the filled shards: its seconds, and the entries graphs index."""
    built = build_components(config)
    try:
        assert isinstance(built.store, EdgeStore)
        began = time.perf_counter()
        reports = built.store.build_graphs()
        return time.perf_counter() - began, sum(r.indexed for r in reports)
    finally:
        for close in (built.store.close, built.journal.close, *built.closers):
            close()


def _rss_mib() -> float:
    """The process's resident memory now (Linux's /proc; else its peak, from getrusage)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _disk_mib(config: TiermemConfig) -> float:
    """What the store's files hold on disk (their blocks: sparse files count what they hold)."""
    where = getattr(config.mtm, "path", None)
    if not isinstance(where, Path) or not where.exists():
        return 0.0
    return sum(p.stat().st_blocks * 512 for p in where.rglob("*") if p.is_file()) / 2**20


START = datetime(2025, 1, 1, tzinfo=UTC)  # the synthetic turns' first day


def measure(
    config: TiermemConfig,
    label: str,
    size: int,
    samples: int,
    users: int = 1,
    fill_s: float | None = None,
    graph: tuple[float, int] = (0.0, 0),
) -> Row:
    """One store at one size. ``fill_s``: the store was filled already (by another process,
    in that many seconds); ``None``: fill it here first. ``graph``: ``_build_graphs``'s
    seconds and entries, for the row."""
    start = START
    # the reference store lives in memory: it is filled and measured in one open memory
    in_memory = isinstance(config.mtm, ReferenceStoreConfig)
    if fill_s is None:
        fill_s = 0.0 if in_memory else _fill(config, users, size, start)
    disk = _disk_mib(config)
    began = time.perf_counter()
    built = build_components(config)
    counters = (CallCounter(built.store), CallCounter(built.journal))
    components = replace(
        built, store=cast(MTMStore, counters[0]), journal=cast(Journal, counters[1])
    )
    with Memory(config, components=components) as memory:
        open_s = time.perf_counter() - began
        if in_memory:
            began = time.perf_counter()
            for u in range(users):
                fill = synthetic_turns(size, seed=1 + u, start=start)
                for i in range(0, size, 250):
                    memory.add(fill[i : i + 250], user_id=f"sam-{u}", session_id=f"f{i // 250}")
            fill_s = time.perf_counter() - began
        rss = _rss_mib()
        first = time.perf_counter()
        memory.search("warm up", "sam-0", k=10)
        first_search_s = time.perf_counter() - first
        pick = random.Random(7)
        who = [f"sam-{pick.randrange(users)}" for _ in range(samples)]
        extra = synthetic_turns(samples, seed=0, start=start + timedelta(days=400))
        add_ms, add_store, add_journal = _counted(
            counters, lambda i: memory.add([extra[i]], user_id=who[i]), range(samples)
        )
        queries = [_QUERIES[i % len(_QUERIES)] for i in range(samples)]
        search_ms = _timed(lambda i: memory.search(queries[i], who[i], k=10), range(samples))
        context_ms, ctx_store, ctx_journal = _counted(
            counters, lambda i: memory.context(queries[i], who[i], 1200), range(samples)
        )
        rss_end = _rss_mib()
        embedder = memory.components.embedder
        embed_ms = _timed(lambda q: embedder.embed([q], EmbedMode.QUERY), queries)
    return Row(
        label,
        users,
        size,
        percentile(add_ms, 50),
        percentile(add_ms, 95),
        percentile(search_ms, 50),
        percentile(search_ms, 95),
        percentile(context_ms, 50),
        percentile(context_ms, 95),
        percentile(embed_ms, 50),
        add_store,
        add_journal,
        ctx_store,
        ctx_journal,
        open_s,
        rss,
        fill_s,
        first_search_s,
        rss_end,
        disk,
        *graph,
    )


def _config(root: Path, embedder: str, location: str, size: int) -> TiermemConfig:
    """The embedded default on ``location``, with room for ``size`` entries and the timed
    adds: what grows is measured, not capacity eviction (every add past ``mtm.capacity``
    evicts, which lists the user's entries)."""
    config = TiermemConfig.for_data_dir(root)
    capacity = max(MTMConfig.model_fields["capacity"].default, 2 * size)
    mtm: MTMConfig
    if location == "path":
        mtm = QdrantConfig(location="path", path=root / "qdrant", capacity=capacity)
    elif location in ("edge", "edge-graph"):
        mtm = EdgeStoreConfig(path=root / "edge", capacity=capacity)
    else:
        mtm = ReferenceStoreConfig(capacity=capacity)
    return config.model_copy(
        update={"mtm": mtm, "embedder": config.embedder.model_copy(update={"kind": embedder})}
    )


def main(
    sizes: Sequence[int],
    samples: int,
    embedder: str,
    out: Path | None,
    console: Console,
    users: int = 1,
    stores: Sequence[str] = tuple(STORES),
) -> list[Row]:
    """Measure each of ``stores`` (labels of ``STORES``) at each size, print the table, and
    write its rows as JSON to ``out``. The ratio column compares with the reference store,
    when the run measures it."""
    unknown = [label for label in stores if label not in STORES]
    if unknown or not stores:
        raise InvalidInputError(f"unknown stores {unknown}; known: {', '.join(STORES)}")
    rows: list[Row] = []
    # fresh processes: the resident memory, the open and the first search are that store's
    # alone, not what the fill or an earlier store left in the process
    spawn = multiprocessing.get_context("spawn")
    for size in sizes:
        for label in stores:
            location = STORES[label]
            with tempfile.TemporaryDirectory(prefix="tiermem-bench-") as tmp:
                console.print(f"filling {label} with {users} x {size} entries ...")
                config = _config(Path(tmp), embedder, location, size)
                fill_s, graph = None, (0.0, 0)
                if location != "reference":  # filled in one process, measured in the next
                    with ProcessPoolExecutor(1, mp_context=spawn) as child:
                        fill_s = child.submit(_fill, config, users, size, START).result()
                if location == "edge-graph":  # and optimized in one between
                    with ProcessPoolExecutor(1, mp_context=spawn) as child:
                        graph = child.submit(_build_graphs, config).result()
                with ProcessPoolExecutor(1, mp_context=spawn) as child:
                    measured = child.submit(
                        measure, config, label, size, samples, users, fill_s, graph
                    )
                    rows.append(measured.result())
    title = f"MTM cost, {users} user(s), embedder={embedder}, {samples} calls each"
    table = Table(title=title)
    columns = [
        "store",
        "entries",
        "add p50/p95 ms",
        "search p50/p95 ms",
        "context p50/p95 ms",
        "context p50 vs reference",
        "store/journal calls per add",
        "per context",
        "open s / first search s",
        "RSS MiB after open / calls",
        "disk MiB",
        "fill s (entries/s)",
    ]
    for column in columns:  # the store's name is never cut: two of them start alike
        table.add_column(column, justify="right", no_wrap=column == "store")
    baseline = {r.entries: r for r in rows if r.store == BASELINE}
    for r in rows:
        base = baseline.get(r.entries)
        ratio = f"{r.context_p50_ms / base.context_p50_ms:.2f}x" if base is not None else "-"
        table.add_row(
            r.store,
            f"{r.users} x {r.entries}",
            f"{r.add_p50_ms:.1f} / {r.add_p95_ms:.1f}",
            f"{r.search_p50_ms:.1f} / {r.search_p95_ms:.1f}",
            f"{r.context_p50_ms:.1f} / {r.context_p95_ms:.1f}",
            ratio,
            f"{r.store_calls_per_add:.1f} / {r.journal_calls_per_add:.1f}",
            f"{r.store_calls_per_context:.1f} / {r.journal_calls_per_context:.1f}",
            f"{r.open_s:.2f} / {r.first_search_s:.2f}",
            f"{r.rss_mib:.0f} / {r.rss_end_mib:.0f}",
            f"{r.disk_mib:.0f}",
            f"{r.fill_s:.1f} ({r.users * r.entries / max(r.fill_s, 1e-9):.0f})"
            + (
                f" + graph {r.graph_s:.1f} ({r.graph_indexed})"
                if STORES[r.store] == "edge-graph"
                else ""
            ),
        )
    console.print(table)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    return rows
