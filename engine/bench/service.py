"""``tiermem bench service``: the latency a client sees through ``tiermem serve`` beside the
in-process ``Memory``, on the same workload, in the same run.

``clients`` threads each play one user and send ``requests`` calls, one at a time: an
``add`` of a new sentence every fourth call (the first included), a ``search`` otherwise.
Both faces run the embedded default store (Qdrant on disk, in a temporary directory) with
the hash embedder and the model-free roles, so what differs is the service: HTTP on
loopback, JSON, authentication, tenant scoping and the limits. Every call is timed; the
report gives p50/p95 of all calls and of each kind, the throughput and the errors (any
exception counts: the expected number is zero).
"""

from __future__ import annotations

import json
import math
import random
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table
from tiermem.config import EmbedderConfig, TiermemConfig
from tiermem.memory import Memory
from tiermem.remote import RemoteMemory
from tiermem.service.keys import add_key
from tiermem.service.launch import ServerProcess

ADD_EVERY = 4
_WORDS = ("garden", "violin", "Porto", "bicycle", "sister", "recipe", "marathon", "cello")


class _Face(Protocol):
    def add(self, messages: Any, user_id: str, session_id: str | None = None) -> Any: ...
    def search(self, query: str, user_id: str, k: int | None = None) -> Any: ...


@dataclass
class LoadResult:
    """One face under the workload."""

    face: str
    clients: int
    requests: int  # per client
    wall_s: float = 0.0
    latencies_s: dict[str, list[float]] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)

    def all_latencies(self) -> list[float]:
        return sorted(x for values in self.latencies_s.values() for x in values)

    def percentile_ms(self, q: float, op: str | None = None) -> float:
        values = sorted(self.latencies_s.get(op, [])) if op else self.all_latencies()
        return 1000 * percentile(values, q)

    def summary(self) -> dict[str, Any]:
        calls = len(self.all_latencies())
        return {
            "face": self.face,
            "clients": self.clients,
            "requests_per_client": self.requests,
            "calls": calls,
            "errors": sum(self.errors.values()),
            "error_types": dict(self.errors),
            "p50_ms": round(self.percentile_ms(0.50), 2),
            "p95_ms": round(self.percentile_ms(0.95), 2),
            "add_p50_ms": round(self.percentile_ms(0.50, "add"), 2),
            "search_p50_ms": round(self.percentile_ms(0.50, "search"), 2),
            "calls_per_s": round(calls / self.wall_s, 1) if self.wall_s else 0.0,
        }


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile of sorted ``values`` (nearest rank); NaN for none.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5), percentile([1.0, 2.0, 3.0, 4.0], 0.95)
    (2.0, 4.0)
    """
    if not values:
        return math.nan
    return values[max(0, math.ceil(q * len(values)) - 1)]


def run_load(
    face: str, clients: int, requests: int, open_face: Callable[[], _Face], seed: int = 0
) -> LoadResult:
    """``clients`` threads, each with its own ``open_face()`` and user, ``requests`` calls."""
    result = LoadResult(face, clients, requests)
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)

    def client(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        memory, user = open_face(), f"bench-user-{index}"
        timings: dict[str, list[float]] = {"add": [], "search": []}
        errors: Counter[str] = Counter()
        barrier.wait()
        for call in range(requests):
            words = " ".join(rng.sample(_WORDS, 3))
            op = "add" if call % ADD_EVERY == 0 else "search"
            started = time.perf_counter()
            try:
                if op == "add":
                    memory.add(f"Note {call}: {words} ({rng.randrange(10**6)}).", user_id=user)
                else:
                    memory.search(words, user_id=user, k=5)
            except Exception as exc:  # noqa: BLE001 - every failure is counted, by type
                errors[type(exc).__name__] += 1
            timings[op].append(time.perf_counter() - started)
        with lock:
            for op, values in timings.items():
                result.latencies_s.setdefault(op, []).extend(values)
            result.errors.update(errors)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    result.wall_s = time.perf_counter() - started
    return result


def bench_config(data_dir: Path) -> TiermemConfig:
    """The embedded default store with the hash embedder (no model: the service is measured)."""
    base = TiermemConfig.for_data_dir(data_dir)
    return base.model_copy(update={"embedder": EmbedderConfig(kind="hash", model="hash-384")})


SERVICE_TOML = """data_dir = "{data_dir}"
[embedder]
kind = "hash"
model = "hash-384"
[service]
max_in_flight = {in_flight}
"""


def measure(clients: int, requests: int, root: Path) -> tuple[LoadResult, LoadResult]:
    """The in-process ``Memory``, then the service, on fresh stores under ``root``."""
    with Memory(bench_config(root / "in-process")) as memory:
        local = run_load("in-process Memory", clients, requests, lambda: memory)
    config = root / "service.toml"
    config.write_text(SERVICE_TOML.format(data_dir=root / "service", in_flight=clients + 8))
    key = add_key(root / "keys.json", "bench")
    server = ServerProcess(config, root / "keys.json", log_file=root / "service.log").start()
    opened: list[RemoteMemory] = []

    def remote() -> RemoteMemory:
        client = RemoteMemory(server.url, key)
        opened.append(client)
        return client

    try:
        served = run_load("tiermem serve + RemoteMemory", clients, requests, remote)
    finally:
        for client in opened:
            client.close()
        server.stop()
    return local, served


def main(clients: int, requests: int, out: Path | None, console: Console) -> None:
    with tempfile.TemporaryDirectory(prefix="tiermem-bench-service-") as tmp:
        local, served = measure(clients, requests, Path(tmp))
    rows = [local.summary(), served.summary()]
    table = Table(title=f"{clients} clients x {requests} requests (1 add : 3 search)")
    columns = ("face", "calls", "errors", "p50_ms", "p95_ms", "add_p50_ms", "search_p50_ms")
    for column in (*columns, "calls_per_s"):
        table.add_column(column.replace("_", " "), justify="left" if column == "face" else "right")
    for row in rows:
        table.add_row(*(str(row[c]) for c in (*columns, "calls_per_s")))
    console.print(table)
    ratio = {q: served.percentile_ms(q) / local.percentile_ms(q) for q in (0.5, 0.95)}
    console.print(
        f"service / in-process: p50 x{ratio[0.5]:.2f}, p95 x{ratio[0.95]:.2f}", highlight=False
    )
    if out is not None:
        out.write_text(json.dumps({"results": rows, "ratios": ratio}, indent=1))
        console.print(f"wrote {out}")
