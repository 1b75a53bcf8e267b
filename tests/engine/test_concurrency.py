"""Searches racing writes: the access statistics a search records are exact, and an entry
deleted while a search is in flight is no error for the reader.

The races are made deterministic with a selector that runs between the first stage and the
access update (the one place a search pauses): it deletes an entry, or holds every thread
until all of them have read their candidates."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from qdrant_client import QdrantClient, models
from tiermem import ManualClock, Memory, TiermemConfig
from tiermem.bench.stress import run_stress, stress_config
from tiermem.cli import main
from tiermem.components import build_components
from tiermem.roles.plan import Candidate, Selection, TopKSelector
from tiermem.stores.base import MTMStore, Retrievals
from tiermem.stores.edge import EdgeStore
from tiermem.stores.qdrant import QdrantStore
from tiermem.stores.reference import ReferenceStore
from tiermem.types import MemoryEntry, MemoryKind

from tests.conftest import T0, chat, config_for

LOCATIONS = ["memory", "path", "edge", "reference"]
Hook = Callable[[Sequence[Candidate]], None]


class HookSelector:
    """Top-k, after running ``hook`` on the candidates the first stage found."""

    name = "hooked-top-k"

    def __init__(self, hook: Hook) -> None:
        self._hook = hook

    def select(self, queries: Sequence[str], candidates: Sequence[Candidate], k: int) -> Selection:
        self._hook(candidates)
        return TopKSelector().select(queries, candidates, k)


@pytest.fixture
def hooked(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[[str, Hook], Memory]]:
    opened: list[Memory] = []

    def make(location: str, hook: Hook) -> Memory:
        config = config_for(location, tmp_path)
        components = replace(build_components(config, clock), selector=HookSelector(hook))
        memory = Memory(config, components=components)
        opened.append(memory)
        return memory

    yield make
    for memory in opened:
        memory.close()


def _seed(memory: Memory, user: str = "u") -> list[str]:
    result = memory.add(
        chat(
            ("user", "I keep bees on the roof."),
            ("user", "The bees made honey in June."),
            ("user", "My honey sells at the market."),
        ),
        user_id=user,
    )
    return [e.id for e in result.entries]


@pytest.mark.parametrize("location", LOCATIONS)
def test_an_entry_deleted_during_a_search_is_skipped_not_raised(
    hooked: Callable[[str, Hook], Memory], location: str
) -> None:
    memory: Memory
    deleted: list[str] = []

    def delete_first(candidates: Sequence[Candidate]) -> None:
        if not deleted:  # another thread's delete(), landing between the two stages
            deleted.append(candidates[0].entry.id)
            memory.delete(candidates[0].entry.id, "u")

    memory = hooked(location, delete_first)
    ids = _seed(memory)
    hits = memory.search("bees honey", "u", k=3)
    assert len(hits) == 3  # found before the delete: the reader still sees what it found
    assert deleted
    assert deleted[0] in ids
    remaining = {e.id: e.access_count for e in memory.get_all("u")}
    assert set(remaining) == set(ids) - set(deleted)
    assert all(count == 1 for count in remaining.values())  # the rest were counted
    assert memory.search("bees honey", "u", k=3)  # and the store still works


@pytest.mark.parametrize("location", LOCATIONS)
def test_a_user_forgotten_during_a_search_is_answered_not_raised(
    hooked: Callable[[str, Hook], Memory], location: str
) -> None:
    """``forget_user`` in another thread lands between the first stage and the counting of
    accesses: the search answers with what it found, writes nothing back for the user, and
    the user is gone."""
    memory: Memory
    forgotten: list[bool] = []

    def forget(candidates: Sequence[Candidate]) -> None:
        if not forgotten:
            forgotten.append(True)
            memory.forget_user("u")

    memory = hooked(location, forget)
    _seed(memory)
    _seed(memory, user="v")
    memory.search("bees honey", "u", k=3)
    assert forgotten
    assert memory.get_all("u") == []
    assert len(memory.get_all("v")) == 3  # another user is untouched
    assert memory.search("bees honey", "u", k=3) == []


@pytest.mark.parametrize("location", LOCATIONS)
def test_concurrent_searches_count_every_access(
    hooked: Callable[[str, Hook], Memory], location: str
) -> None:
    threads, rounds = 6, 3
    barrier = threading.Barrier(threads, timeout=10)
    # Every search reads its candidates before any of them records an access.
    memory = hooked(location, lambda _: barrier.wait())
    ids = _seed(memory)
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in range(rounds):
                memory.search("bees honey", "u", k=3)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
            barrier.abort()

    workers = [threading.Thread(target=reader) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    counts = {e.id: e.access_count for e in memory.get_all("u")}
    assert counts == dict.fromkeys(ids, threads * rounds)


def _entry(entry_id: str, count: int) -> MemoryEntry:
    return MemoryEntry(
        entry_id, "u", "bees", MemoryKind.TURN, T0, T0, access_count=count, last_accessed=T0
    )


@pytest.fixture(params=["qdrant", "edge", "reference"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MTMStore]:
    made: MTMStore
    if request.param == "qdrant":
        made = QdrantStore(QdrantClient(":memory:"), dim=4, prefix="t_", server=False)
    elif request.param == "edge":
        made = EdgeStore(tmp_path / "edge", dim=4, prefix="t_")
    else:
        made = ReferenceStore(4)
    yield made
    made.close()


ID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
VECTOR = np.ones((1, 4), dtype=np.float32)


def _once(*ids: str, at: datetime = T0) -> dict[str, Retrievals]:
    return {i: Retrievals(1, at) for i in ids}


def test_record_access_counts_from_the_stored_value_and_skips_missing_ids(
    store: MTMStore,
) -> None:
    store.upsert("u", [_entry(ID, 2)], VECTOR)
    later = T0.replace(hour=12)
    missing = "00000000-0000-4000-8000-000000000000"
    updated = store.record_access("u", _once(ID, missing, "not-a-uuid", at=later))
    assert set(updated) == {ID}
    assert (updated[ID].access_count, updated[ID].last_accessed) == (3, later)
    assert store.get("u", [ID])[0].access_count == 3
    assert store.record_access("nobody", _once(ID, at=later)) == {}
    # a batch of several retrievals adds them all, and keeps the last time
    updated = store.record_access("u", {ID: Retrievals(4, T0.replace(hour=13))})
    assert (updated[ID].access_count, updated[ID].last_accessed) == (7, T0.replace(hour=13))
    assert store.get("u", [ID])[0].access_count == 7


def test_an_upsert_from_a_stale_read_keeps_the_recorded_accesses(store: MTMStore) -> None:
    """update() reads an entry, a search counts an access, update() writes the entry back:
    the write must not take the count back to what it read."""
    store.upsert("u", [_entry(ID, 0)], VECTOR)
    stale = store.get("u", [ID])[0]
    store.record_access("u", _once(ID, at=T0.replace(hour=12)))
    store.upsert("u", [replace(stale, text="bees and wasps")], VECTOR)
    now = store.get("u", [ID])[0]
    assert (now.text, now.access_count, now.last_accessed) == (
        "bees and wasps",
        1,
        T0.replace(hour=12),
    )


class DeletedByAnotherProcess(QdrantClient):
    """A client on a server shared with another process, which deletes ``victim`` just
    before this process's next payload write lands."""

    victim: str | None = None

    def batch_update_points(self, collection_name: str, *args: Any, **kwargs: Any) -> Any:
        if self.victim is not None:
            ids: list[models.ExtendedPointId] = [self.victim]
            self.victim = None
            self.delete(collection_name, points_selector=models.PointIdsList(points=ids))
        return super().batch_update_points(collection_name, *args, **kwargs)


OTHER = "9b2f4c1e-5d6a-4e7b-8c9d-0a1b2c3d4e5f"


@pytest.mark.parametrize("order", [(ID, OTHER), (OTHER, ID)])
def test_a_point_deleted_by_another_process_mid_write_is_skipped_and_nothing_counts_twice(
    order: tuple[str, str],
) -> None:
    client = DeletedByAnotherProcess(":memory:")
    store = QdrantStore(client, dim=4, prefix="t_", server=False)
    store.upsert("u", [_entry(ID, 0), _entry(OTHER, 5)], np.ones((2, 4), dtype=np.float32))
    client.victim = ID
    updated = store.record_access("u", _once(*order))
    assert {i: u.access_count for i, u in updated.items()} == {OTHER: 6}
    assert [(e.id, e.access_count) for e in store.get("u", [ID, OTHER])] == [(OTHER, 6)]
    store.close()


def test_bench_stress_runs_bounded_and_finds_nothing_wrong(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "stress", "--threads", "2", "--seconds", "0.5", "--users", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 thread(s): 0 unexpected errors (0 not a TiermemError)" in out
    assert "2 thread(s): 0 lost increments (0 entries short), 0 phantom" in out
    assert "throughput, 2 threads / 1 thread:" in out


class ForgetfulStore(ReferenceStore):
    """Counts no access, and its first search fails with a raw, untyped error."""

    searches = 0

    def record_access(self, user_id: str, retrievals: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    def hybrid_search(self, *args: Any, **kwargs: Any) -> Any:
        self.searches += 1
        if self.searches == 1:
            raise KeyError("raw")
        return super().hybrid_search(*args, **kwargs)


def test_bench_stress_reports_lost_increments_and_untyped_errors(tmp_path: Path) -> None:
    def forgetful(config: TiermemConfig) -> Memory:
        built = build_components(config)
        built.store.close()
        return Memory(config, components=replace(built, store=ForgetfulStore(built.store.dim)))

    config = stress_config(tmp_path, "hash")
    result = run_stress(config, threads=2, seconds=0.3, users=1, open_memory=forgetful)
    assert result.errors[("defect", "search", "KeyError")] == 1
    returned = sum(result.returned.values())
    assert returned > 0
    assert result.lost_increments > 0
    assert result.lost_increments <= returned  # entries deleted since are not checked
