"""``tiermem bench stress``: many threads adding, searching, updating and deleting at once.

On the embedded default store (Qdrant on disk under a temporary directory, model-free roles),
``threads`` threads run a mix of ``add``/``search``/``update``/``delete`` for ``seconds``
against a few users, then stop by themselves. The report says:

- operations completed, by type, and the rate beside a single-threaded run of the same mix
  measured in the same invocation (the baseline);
- errors by exception type, in three classes: *expected* (``MemoryNotFoundError`` from an
  update or delete of an id another thread deleted), *typed* (any other ``TiermemError``: a
  failure tiermem reported, unexpected here) and *defect* (anything not a ``TiermemError``);
- lost increments: for every entry still stored, how many times ``search()`` returned it
  against the access count the store holds. Each return counts one access, so the two must
  be equal; fewer stored is a lost increment, more is a phantom one.
"""

from __future__ import annotations

import random
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table
from tiermem.config import TiermemConfig
from tiermem.errors import MemoryNotFoundError, TiermemError
from tiermem.memory import Memory
from tiermem.types import SearchFilters, Tier

OPS = ("add", "search", "update", "delete")
_WEIGHTS = (3, 5, 1, 1)  # of every 10 operations
_PEOPLE = ("my sister", "the vet", "my coach", "our neighbour", "my manager", "the choir")
_DEEDS = ("booked", "moved", "repaired", "borrowed", "planned", "painted")
_THINGS = ("a trip to Porto", "the blue bicycle", "a cello lesson", "the garden shed")
_WHEN = ("on Monday", "last spring", "in October", "after the storm", "this weekend")
SEED_TURNS = 8  # per user, before the clock starts


def _sentence(rng: random.Random) -> str:
    return (
        f"{rng.choice(_PEOPLE).capitalize()} {rng.choice(_DEEDS)} {rng.choice(_THINGS)} "
        f"{rng.choice(_WHEN)} (note {rng.randrange(1_000_000)})."
    )


def _query(rng: random.Random) -> str:
    return f"{rng.choice(_PEOPLE)} {rng.choice(_THINGS)}"


@dataclass
class StressResult:
    """One run: what completed, what failed (by class and type), and the access check."""

    threads: int
    seconds: float
    ops: Counter[str] = field(default_factory=Counter)
    errors: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # class, op, type
    returned: Counter[tuple[str, str]] = field(default_factory=Counter)  # (user, id) -> hits
    entries_checked: int = 0
    lost_increments: int = 0
    entries_short: int = 0
    phantom_increments: int = 0

    @property
    def rate(self) -> float:
        return sum(self.ops.values()) / self.seconds if self.seconds > 0 else 0.0

    def count(self, kind: str) -> int:
        return sum(n for (k, _, _), n in self.errors.items() if k == kind)


class _Workload:
    """Shared state of one run: the ids each user is known to have, and the tallies."""

    def __init__(self, memory: Memory, users: list[str], result: StressResult) -> None:
        self.memory, self.users, self.result = memory, users, result
        self._lock = threading.Lock()
        self._ids: dict[str, list[str]] = {u: [] for u in users}
        self._doomed: set[str] = set()  # ids a delete was started for

    def seed(self, rng: random.Random) -> None:
        for user in self.users:
            for _ in range(SEED_TURNS):
                self._add(user, rng)

    def _add(self, user: str, rng: random.Random) -> None:
        added = self.memory.add([{"role": "user", "content": _sentence(rng)}], user_id=user)
        with self._lock:
            self._ids[user].extend(e.id for e in added.entries)

    def _pick(self, user: str, rng: random.Random, *, doom: bool) -> str | None:
        with self._lock:
            ids = self._ids[user]
            if not ids:
                return None
            picked = ids.pop(rng.randrange(len(ids))) if doom else rng.choice(ids)
            if doom:
                self._doomed.add(picked)
            return picked

    def step(self, op: str, rng: random.Random) -> None:
        user = rng.choice(self.users)
        target: str | None = None
        try:
            if op == "add":
                self._add(user, rng)
            elif op == "search":
                hits = self.memory.search(_query(rng), user_id=user, k=5)
                returned = [(user, h.id) for h in hits if h.tier is Tier.MTM]
                with self._lock:
                    self.result.returned.update(returned)
            else:
                target = self._pick(user, rng, doom=op == "delete")
                if target is None:
                    return
                if op == "update":
                    self.memory.update(target, _sentence(rng), user_id=user)
                else:
                    self.memory.delete(target, user_id=user)
        except Exception as exc:  # noqa: BLE001 - every failure is counted by its class
            self._count_error(op, exc, target)
            return
        with self._lock:
            self.result.ops[op] += 1

    def _count_error(self, op: str, exc: Exception, target: str | None) -> None:
        with self._lock:
            if isinstance(exc, MemoryNotFoundError) and target in self._doomed:
                kind = "expected"  # another thread deleted it first
            elif isinstance(exc, TiermemError):
                kind = "typed"
            else:
                kind = "defect"
            self.result.errors[(kind, op, type(exc).__name__)] += 1

    def check_access_counts(self) -> None:
        """Every entry still stored: its access count against the times it was returned."""
        r = self.result
        everything = SearchFilters(include_superseded=True)
        for user in self.users:
            for entry in self.memory.get_all(user, everything):
                r.entries_checked += 1
                gap = r.returned[(user, entry.id)] - entry.access_count
                if gap > 0:
                    r.lost_increments += gap
                    r.entries_short += 1
                elif gap < 0:
                    r.phantom_increments -= gap


def stress_config(root: Path, embedder: str) -> TiermemConfig:
    """The embedded default under ``root``, model-free, with this embedder provider."""
    config = TiermemConfig.for_data_dir(root)
    model = "hash-384" if embedder == "hash" else config.embedder.model
    return config.model_copy(
        update={"embedder": config.embedder.model_copy(update={"kind": embedder, "model": model})}
    )


def run_stress(
    config: TiermemConfig,
    threads: int,
    seconds: float,
    users: int = 4,
    seed: int = 0,
    open_memory: Callable[[TiermemConfig], Memory] = Memory,
) -> StressResult:
    """``threads`` threads run the mix for ``seconds`` on a fresh memory opened from
    ``config``; then every stored entry's access count is checked."""
    result = StressResult(threads, seconds)
    names = [f"stress-user-{i}" for i in range(users)]
    with open_memory(config) as memory:
        work = _Workload(memory, names, result)
        work.seed(random.Random(seed))
        deadline = time.monotonic() + seconds

        def worker(index: int) -> None:
            rng = random.Random(seed * 1000 + index + 1)
            while time.monotonic() < deadline:
                work.step(rng.choices(OPS, _WEIGHTS)[0], rng)

        started = time.monotonic()
        pool = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        result.seconds = time.monotonic() - started
        work.check_access_counts()
    return result


def _table(baseline: StressResult, run: StressResult) -> Table:
    table = Table(title="operations completed")
    table.add_column("operation")
    table.add_column(f"{baseline.threads} thread", justify="right")
    table.add_column(f"{run.threads} threads", justify="right")
    for op in OPS:
        table.add_row(op, str(baseline.ops[op]), str(run.ops[op]))
    table.add_row("ops/s", f"{baseline.rate:.1f}", f"{run.rate:.1f}")
    return table


def _errors(result: StressResult) -> Table:
    table = Table(title=f"errors with {result.threads} thread(s), by exception type")
    for name in ("class", "operation", "exception", "count"):
        table.add_column(name)
    for (kind, op, name), n in sorted(result.errors.items()):
        table.add_row(kind, op, name, str(n))
    if not result.errors:
        table.add_row("-", "-", "none", "0")
    return table


def report(baseline: StressResult, run: StressResult, console: Console) -> None:
    console.print(_table(baseline, run))
    for result in (baseline, run):
        console.print(_errors(result))
    for result in (baseline, run):
        n = result.threads
        unexpected = result.count("typed") + result.count("defect")
        console.print(
            f"{n} thread(s): {unexpected} unexpected errors ({result.count('defect')} not a "
            f"TiermemError), {result.count('expected')} expected",
            soft_wrap=True,
        )
        console.print(
            f"{n} thread(s): {result.lost_increments} lost increments "
            f"({result.entries_short} entries short), {result.phantom_increments} phantom, "
            f"over {result.entries_checked} entries returned {sum(result.returned.values())} "
            "times",
            soft_wrap=True,
        )
    ratio = run.rate / baseline.rate if baseline.rate else float("nan")
    console.print(f"throughput, {run.threads} threads / 1 thread: {ratio:.2f}x", soft_wrap=True)


def main(
    threads: int, seconds: float, embedder: str, users: int, seed: int, console: Console
) -> tuple[StressResult, StressResult]:
    """The single-threaded baseline, then the concurrent run, each on a fresh memory."""
    results = []
    for n in (1, threads):
        with tempfile.TemporaryDirectory(prefix="tiermem-stress-") as tmp:
            console.print(f"running {n} thread(s) for {seconds:g} s ...")
            results.append(run_stress(stress_config(Path(tmp), embedder), n, seconds, users, seed))
    baseline, run = results
    report(baseline, run, console)
    return baseline, run
