"""A bounded load test: concurrent clients through ``RemoteMemory`` against a real ``tiermem
serve``; every call answered, none failed. ``tiermem bench service`` measures the same
workload at size, beside the in-process ``Memory``."""

from __future__ import annotations

from tiermem.bench.service import run_load
from tiermem.remote import RemoteMemory

from tests.service.conftest import Served

CLIENTS, REQUESTS = 4, 12


def test_concurrent_clients_get_every_answer_and_no_error(served: Served) -> None:
    opened: list[RemoteMemory] = []

    def client() -> RemoteMemory:
        opened.append(RemoteMemory(served.url, served.keys.beta))
        return opened[-1]

    result = run_load("service", CLIENTS, REQUESTS, client, seed=7)
    for memory in opened:
        memory.close()
    summary = result.summary()
    print(f"\nload: {summary}")
    assert summary["errors"] == 0, summary["error_types"]
    assert summary["calls"] == CLIENTS * REQUESTS
    assert 0 < summary["p50_ms"] <= summary["p95_ms"]
    with RemoteMemory(served.url, served.keys.beta) as check:
        adds = -(-REQUESTS // 4)  # one add in four, the first included
        assert all(len(check.get_all(f"bench-user-{i}")) == adds for i in range(CLIENTS))
