"""What the ``edge`` store adds to the MTM contract (the congruence suite, and every memory
test on ``edge``, hold it to the rest): a shard per user, locked to one opener, at most
``max_open`` open, erased to the directory, embedder records and reindex as on the server
path, no boolean filter for Edge 0.9.0 to drop, its optimize policy, and a full disk."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe
from tiermem import ManualClock, Memory
from tiermem.config import TiermemConfig
from tiermem.config.stores import EdgeStoreConfig, QdrantConfig
from tiermem.embedding.base import EmbedMode
from tiermem.embedding.hashing import HashEmbedder
from tiermem.errors import AuditError, EmbedderMismatchError, StoreError
from tiermem.pipeline.reindex import reindex_user
from tiermem.settings import load_config
from tiermem.stores.base import EmbedderRecord, Retrievals
from tiermem.stores.edge import EdgeStore
from tiermem.stores.edge_schema import to_edge_filter
from tiermem.stores.edge_shards import META_FILE, ShardLockedError, ShardPool
from tiermem.stores.factory import build_mtm_store
from tiermem.stores.naming import collection_name
from tiermem.types import MemoryEntry, MemoryKind, SearchFilters

from tests.conftest import T0, chat, config_for, fill, tmpfs

DIM = 16
EMBEDDER = HashEmbedder(DIM)


def _entries(user: str, n: int, start: int = 0) -> list[MemoryEntry]:
    return [
        MemoryEntry(str(uuid.UUID(int=start + i + 1)), user, f"note {i} about the oboe",
                    MemoryKind.FACT, T0, T0)
        for i in range(n)
    ]  # fmt: skip


def _write(store: EdgeStore, user: str, n: int, start: int = 0) -> list[MemoryEntry]:
    entries = _entries(user, n, start)
    store.upsert(user, entries, EMBEDDER.embed([e.text for e in entries], EmbedMode.DOCUMENT))
    return entries


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[list[EdgeStore]]:
    opened: list[EdgeStore] = []
    yield opened
    for store in opened:
        store.close()


def _store(stores: list[EdgeStore], root: Path, **kwargs: object) -> EdgeStore:
    store = EdgeStore(root, dim=DIM, prefix="t_", **kwargs)  # type: ignore[arg-type]
    stores.append(store)
    return store


def _shard(root: Path, user: str) -> Path:
    return root / collection_name("t_", user)


def _shards(root: Path) -> list[str]:
    """The shard directories under ``root`` (not the template new shards are copied from)."""
    return sorted(p.name for p in root.iterdir() if not p.name.startswith("."))


# -- one shard per user, locked, a bounded set open --------------------------------------------


def test_each_user_has_a_shard_directory_named_by_a_digest(
    tmp_path: Path, stores: list[EdgeStore]
) -> None:
    store = _store(stores, tmp_path, embedder=EMBEDDER.name)
    _write(store, "ana/../../etc", 2)
    _write(store, "bob", 1)
    assert _shards(tmp_path) == sorted(collection_name("t_", u) for u in ("ana/../../etc", "bob"))
    assert (store.count("ana/../../etc"), store.count("bob"), store.count("cy")) == (2, 1, 0)
    assert not _shard(tmp_path, "cy").exists()  # a read makes no shard


def test_a_second_opener_of_a_users_shard_is_refused_with_a_typed_error(
    tmp_path: Path, stores: list[EdgeStore]
) -> None:
    first = _store(stores, tmp_path)
    written = _write(first, "ana", 3)
    second = _store(stores, tmp_path)
    with pytest.raises(ShardLockedError, match="in use by process"):
        second.count("ana")
    _write(second, "bob", 1)  # another user's shard is free
    first.close()  # its locks go with it: the shard is whole for the next opener
    assert [e.id for e in second.list_entries("ana")] == [e.id for e in written]


@pytest.mark.slow  # a second Python process
def test_another_process_is_refused_and_corrupts_nothing(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path, dim=DIM, prefix="t_")
    written = _write(store, "ana", 5)
    script = textwrap.dedent(f"""
        from pathlib import Path
        from tiermem.stores.edge import EdgeStore
        from tiermem.stores.edge_shards import ShardLockedError
        store = EdgeStore(Path({str(tmp_path)!r}), dim={DIM}, prefix="t_")
        try:
            store.count("ana")
        except ShardLockedError as exc:
            print("refused:", exc)
        print("bob:", store.count("bob"))
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert "refused: MTM shard" in done.stdout
    assert "bob: 0" in done.stdout
    _write(store, "ana", 2, start=100)  # the holder goes on writing
    store.close()
    reopened = EdgeStore(tmp_path, dim=DIM, prefix="t_")
    assert reopened.count("ana") == 7
    assert {e.id for e in written} <= {e.id for e in reopened.list_entries("ana")}
    reopened.close()


def test_at_most_max_open_shards_are_open_and_the_least_recent_goes_first(
    tmp_path: Path, stores: list[EdgeStore]
) -> None:
    store = _store(stores, tmp_path, max_open=2)
    for user in ("a", "b", "c"):
        _write(store, user, 2)
    store.count("b")  # b is now the most recent: a was closed for c, and c goes before b
    other = _store(stores, tmp_path)
    assert other.count("a") == 2  # closed, so its lock was released
    with pytest.raises(ShardLockedError):
        other.count("b")
    _write(store, "d", 1)
    assert other.count("c") == 2  # closed for d
    assert [store.count(u) for u in ("b", "d")] == [2, 1]


def test_a_shard_pool_counts_its_open_files(tmp_path: Path) -> None:
    pool = ShardPool(tmp_path, dim=DIM, max_open=2)
    for i in range(4):
        pool.open(f"s{i}", create=True)
    assert pool.open_names() == ["s2", "s3"]
    pool.close_all()
    assert pool.open_names() == []


# -- erasure ---------------------------------------------------------------------------------


def test_drop_user_removes_the_shard_directory_wal_and_all(
    tmp_path: Path, stores: list[EdgeStore]
) -> None:
    store = _store(stores, tmp_path)
    _write(store, "ana", 30)
    _write(store, "bob", 2)
    assert (_shard(tmp_path, "ana") / "wal").is_dir()
    store.drop_user("ana")
    assert not _shard(tmp_path, "ana").exists()
    assert _shards(tmp_path) == [_shard(tmp_path, "bob").name]
    assert store.count("ana") == 0
    assert not any(b"oboe" in p.read_bytes() for p in tmp_path.rglob("*") if "bob" in p.name)
    _write(store, "ana", 1)  # and the user can start again
    assert store.count("ana") == 1


# -- the record of the embedder, and reindex ----------------------------------------------


def test_another_embedders_shard_is_refused_and_an_unrecorded_one_adopted(
    tmp_path: Path, stores: list[EdgeStore]
) -> None:
    writer = _store(stores, tmp_path, embedder="model-a")
    _write(writer, "ana", 2)
    writer.close()
    with pytest.raises(EmbedderMismatchError):
        _store(stores, tmp_path, embedder="model-b").count("ana")
    (_shard(tmp_path, "ana") / META_FILE).unlink()  # written before shards had records
    assert _store(stores, tmp_path, embedder="model-b").count("ana") == 2
    with pytest.raises(EmbedderMismatchError):
        _store(stores, tmp_path, embedder="model-a").count("ana")


def test_a_shard_of_another_size_is_refused(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path, dim=DIM, prefix="t_")
    _write(store, "ana", 1)
    store.close()
    with pytest.raises(StoreError, match="size 16"):
        EdgeStore(tmp_path, dim=8, prefix="t_").count("ana")


def test_reindex_replaces_the_shard_and_a_stopped_one_is_refused_until_run_again(
    tmp_path: Path, stores: list[EdgeStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _store(stores, tmp_path, embedder="old")
    written = _write(old, "ana", 4)
    old.record_access("ana", {written[0].id: Retrievals(3, T0)})
    old.close()
    store = _store(stores, tmp_path, embedder=EMBEDDER.name)
    with pytest.raises(EmbedderMismatchError):
        store.count("ana")

    def stop(self: ShardPool, source: str, target: str) -> None:
        raise KeyboardInterrupt  # the process stops between removing and moving

    monkeypatch.setattr(ShardPool, "rename", stop)
    with pytest.raises(KeyboardInterrupt):
        reindex_user(store, EMBEDDER, "ana")
    monkeypatch.undo()
    with pytest.raises(StoreError, match="run it again"):
        store.count("ana")
    report = reindex_user(store, EMBEDDER, "ana")
    # from the finished copy, which records the new embedder already
    assert (report.entries, report.previous) == (4, EmbedderRecord(EMBEDDER.name, DIM))
    assert store.count("ana") == 4
    assert store.get("ana", [written[0].id])[0].access_count == 3
    probe = EMBEDDER.embed([written[2].text], EmbedMode.QUERY)[0]
    assert store.search("ana", probe, SearchFilters(), 1)[0].entry.id == written[2].id
    assert _shards(tmp_path) == [_shard(tmp_path, "ana").name]


# -- filters: no boolean match ---------------------------------------------------------------


def _conditions(query_filter: qe.Filter | None) -> list[object]:
    return list(query_filter.must or []) if query_filter is not None else []


@pytest.mark.parametrize(
    "filters",
    [
        SearchFilters(),
        SearchFilters(include_superseded=True, session_id="s1"),
        SearchFilters(kinds=(MemoryKind.FACT,), since=T0, until=T0),
    ],
)
def test_no_filter_matches_a_boolean_which_edge_0_9_silently_drops(
    filters: SearchFilters,
) -> None:
    for condition in _conditions(to_edge_filter(filters)):
        match = getattr(condition, "match", None)
        assert not isinstance(getattr(match, "value", None), bool), condition


def test_superseded_entries_are_filtered_out_without_a_boolean(
    tmp_path: Path, stores: list[EdgeStore]
) -> None:
    store = _store(stores, tmp_path)
    old, new = _write(store, "ana", 2)
    store.set_superseded("ana", {old.id: new.id, str(uuid.uuid4()): new.id})
    assert [e.id for e in store.list_entries("ana", SearchFilters())] == [new.id]
    both = store.list_entries("ana", SearchFilters(include_superseded=True))
    assert [e.superseded_by for e in both] == [new.id, None]
    store.set_superseded("ana", {old.id: None})
    assert len(store.list_entries("ana", SearchFilters())) == 2


# -- the optimize policy ---------------------------------------------------------------------


def _segments(root: Path, user: str) -> set[str]:
    return {p.name for p in (_shard(root, user) / "segments").iterdir()}


@pytest.mark.slow  # 3,000 entries, a vacuum
def test_writes_and_reads_never_optimize_and_closing_vacuums_a_deleted_fifth(
    tmp_path: Path,
) -> None:
    store = EdgeStore(tmp_path, dim=DIM, prefix="t_")
    written = _write(store, "ana", 1500)
    _write(store, "bob", 1500, start=5000)
    before = _segments(tmp_path, "ana")
    store.delete("ana", [e.id for e in written[:600]])  # 40 %: past Qdrant's fifth
    store.delete("bob", [e.id for e in _entries("bob", 100, start=5000)])  # under a fifth
    probe = EMBEDDER.embed(["oboe"], EmbedMode.QUERY)[0]
    assert len(store.hybrid_search("ana", probe, "oboe", SearchFilters(), 5).dense) == 5
    assert _segments(tmp_path, "ana") == before  # no optimize on the way
    bob = _segments(tmp_path, "bob")
    store.close()
    assert _segments(tmp_path, "ana") != before  # vacuumed into a new segment on close
    assert _segments(tmp_path, "bob") == bob  # a twentieth deleted: nothing planned
    reopened = EdgeStore(tmp_path, dim=DIM, prefix="t_")
    assert (reopened.count("ana"), reopened.count("bob")) == (900, 1400)
    reopened.close()


# -- a graph built offline (`tiermem optimize`) -------------------------------------------------


def _random_entries(store: EdgeStore, user: str, n: int, seed: int) -> dict[str, np.ndarray]:
    """``n`` entries with random unit vectors: each is its own vector's only nearest entry."""
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    entries = _entries(user, n, start=seed * 100_000)
    store.upsert(user, entries, vectors)
    return {e.id: v for e, v in zip(entries, vectors, strict=True)}


def _nearest(store: EdgeStore, user: str, vector: np.ndarray) -> str:
    return store.search(user, vector, SearchFilters(), 3)[0].entry.id


def _optimizer_threshold(root: Path, user: str) -> object:
    config = json.loads((_shard(root, user) / "edge_config.json").read_text())
    return config["optimizers"]["indexing_threshold"]


@pytest.mark.slow  # 3,000 entries, a graph built
def test_a_graph_built_offline_is_searched_and_the_online_path_never_builds_one(
    tmp_path: Path,
) -> None:
    store = EdgeStore(tmp_path, dim=DIM, prefix="t_")
    ana = _random_entries(store, "ana", 3000, seed=1)
    _random_entries(store, "bob", 20, seed=2)  # 1.3 KB of vectors: under the threshold
    built = {r.name: r for r in store.build_graphs(threshold_kb=100)}
    assert built[collection_name("t_", "ana")].indexed == 3000  # 188 KB of vectors
    assert built[collection_name("t_", "bob")].indexed == 0
    assert _optimizer_threshold(tmp_path, "ana") == 0  # what the online path opens
    probes = list(ana.items())[::150]
    assert all(_nearest(store, "ana", v) == i for i, v in probes)
    late = _random_entries(store, "ana", 50, seed=3)  # beside the graph, in a plain segment
    assert all(_nearest(store, "ana", v) == i for i, v in late.items())
    store.delete("ana", [i for i, _ in probes[:5]])
    store.close()  # it saw a delete: closing runs optimize(), with the online threshold
    reopened = EdgeStore(tmp_path, dim=DIM, prefix="t_")
    assert reopened.count("ana") == 3045
    assert all(_nearest(reopened, "ana", v) == i for i, v in probes[5:])
    reopened.drop_user("ana")  # erasure removes the graph with the rest
    assert not _shard(tmp_path, "ana").exists()
    reopened.close()


def test_a_stopped_builds_threshold_is_reset_with_the_shards_own_vector_size(
    tmp_path: Path,
) -> None:
    """A reindex to another embedder reads the old shard first: a build killed in it must not
    make that shard unreadable."""
    small = EdgeStore(tmp_path, dim=8, prefix="t_")
    small.upsert("cy", _entries("cy", 2), np.ones((2, 8), dtype=np.float32))
    small.close()
    edge_config = _shard(tmp_path, "cy") / "edge_config.json"
    left = json.loads(edge_config.read_text())
    left["optimizers"]["indexing_threshold"] = 100  # what a build killed part way leaves
    edge_config.write_text(json.dumps(left))
    store = EdgeStore(tmp_path, dim=DIM, prefix="t_")
    assert len(store.export_user("cy").entries) == 2
    assert _optimizer_threshold(tmp_path, "cy") == 0
    store.close()


def test_a_shard_that_cannot_be_built_is_reported_and_the_others_are_built(
    tmp_path: Path, stores: list[EdgeStore]
) -> None:
    holder = _store(stores, tmp_path)
    _write(holder, "ana", 3)  # held open by another store
    small = EdgeStore(tmp_path, dim=8, prefix="t_")
    small.upsert("cy", _entries("cy", 2), np.ones((2, 8), dtype=np.float32))
    small.close()  # a shard of another vector size
    other = _store(stores, tmp_path)
    bob = _random_entries(other, "bob", 2000, seed=5)  # 125 KiB of vectors
    reports = {r.name: r for r in other.build_graphs(threshold_kb=100)}
    assert "in use by process" in str(reports[collection_name("t_", "ana")].error)
    assert "size 8, not 16" in str(reports[collection_name("t_", "cy")].error)
    built = reports[collection_name("t_", "bob")]
    assert (built.error, built.indexed) == (None, 2000)
    assert holder.count("ana") == 3
    assert all(_nearest(other, "bob", v) == i for i, v in list(bob.items())[::200])


@pytest.mark.slow  # a second Python process, killed while it builds a graph
def test_a_graph_build_killed_half_way_loses_nothing(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path, dim=DIM, prefix="t_")
    written = _random_entries(store, "ana", 50_000, seed=4)
    store.close()
    script = textwrap.dedent(f"""
        from pathlib import Path
        from tiermem.stores.edge import EdgeStore
        print("building", flush=True)
        EdgeStore(Path({str(tmp_path)!r}), dim={DIM}, prefix="t_").build_graphs(threshold_kb=100)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline() == "building\n"
    temp = _shard(tmp_path, "ana") / "temp_segments"
    deadline = time.monotonic() + 120
    while not (temp.is_dir() and any(temp.iterdir())):  # Edge has begun its copy
        assert child.poll() is None, "the build ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.2)  # into the build (about 5 s for 50,000 entries on two cores)
    child.kill()
    child.wait(timeout=60)
    assert _optimizer_threshold(tmp_path, "ana") == 100  # killed part way
    assert any(temp.iterdir())  # a half-built copy of the shard, deleted entries and all
    reopened = EdgeStore(tmp_path, dim=DIM, prefix="t_")
    assert reopened.count("ana") == 50_000
    assert _optimizer_threshold(tmp_path, "ana") == 0  # a stopped build is no online build
    assert not any(temp.iterdir())
    probes = list(written.items())[::2500]
    assert all(_nearest(reopened, "ana", v) == i for i, v in probes)
    [report] = reopened.build_graphs(threshold_kb=100)  # run again, it finishes
    assert report.indexed == 50_000
    assert all(_nearest(reopened, "ana", v) == i for i, v in probes)
    reopened.close()


def test_tiermem_optimize_on_a_data_directory_a_held_shard_and_a_store_of_another_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tiermem.cli import main

    root = tmp_path / "data"
    config = tmp_path / "tiermem.toml"
    config.write_text('[embedder]\nkind = "hash"\nmodel = "hash-384"\n')
    memory = Memory(config_for("edge", root), clock=ManualClock(T0))
    memory.add(chat(("user", "I keep bees on the roof.")), "ana")
    memory.add(chat(("user", "I sail on Sundays.")), "bob")
    assert main(["optimize", "--data-dir", str(root), "--config", str(config)]) == 2
    assert "in use by process" in capsys.readouterr().out  # the memory holds its shards
    memory.close()
    assert main(["optimize", "--data-dir", str(root), "--config", str(config)]) == 0
    said = capsys.readouterr().out
    assert "0 of 2 shards" in said
    assert "2 hold under" in said
    with Memory(config_for("edge", root), clock=ManualClock(T0)) as reopened:
        assert [h.entry.text for h in reopened.search("bees", "ana", k=1)] == [
            "Ana: I keep bees on the roof."
        ]
    nowhere = tmp_path / "nowhere"
    assert main(["optimize", "--data-dir", str(nowhere), "--config", str(config)]) == 2
    assert "no Edge shards at" in capsys.readouterr().out
    assert not nowhere.exists()
    local = tmp_path / "local.toml"
    local.write_text('[embedder]\nkind = "hash"\nmodel = "hash-384"\n[mtm]\nkind = "qdrant"\n')
    assert main(["optimize", "--data-dir", str(root), "--config", str(local)]) == 2
    assert "Qdrant Edge shards" in capsys.readouterr().out


# -- a full disk: typed errors, never SIGBUS ---------------------------------------------------


@pytest.mark.slow  # fills a 400 MiB tmpfs
def test_a_disk_without_room_for_edge_gives_typed_errors_and_keeps_every_write(
    tmp_path: Path,
) -> None:
    with tmpfs(tmp_path / "disk", "400m") as disk:  # opening a shard on tmpfs takes ~90 MiB
        clock = ManualClock(T0)
        memory = Memory(config_for("edge", disk), clock=clock)
        kept = {e.id: e.text for e in memory.add(chat(("user", "I keep bees.")), "ana").entries}
        filler = fill(disk)
        with pytest.raises((AuditError, StoreError)):  # the journal (same disk) may fail first
            memory.add(chat(("user", "I sell honey.")), "ana")
        store = memory.components.store
        vectors = np.ones((1, 384), dtype=np.float32)
        for user in ("ana", "bob"):  # a write, and a shard that cannot be made
            with pytest.raises(StoreError, match="MiB free"):
                store.upsert(user, _entries(user, 1, start=900), vectors)
        assert {e.id: e.text for e in memory.get_all("ana")} == kept  # reads still answer
        with pytest.raises(StoreError, match="MiB free"):
            store.check_writable()
        memory.close()
        filler.unlink()
        reopened = Memory(config_for("edge", disk), clock=clock)
        assert {e.id: e.text for e in reopened.get_all("ana")} == kept
        assert reopened.add(chat(("user", "Room again.")), "ana").entries
        reopened.close()


# -- configuration ---------------------------------------------------------------------------


def test_the_embedded_default_is_edge_and_a_local_mode_directory_keeps_local_mode(
    tmp_path: Path,
) -> None:
    """A new data directory gets Edge shards; one that holds local mode's files and no shards
    (written before Edge was the default) keeps them, until ``tiermem migrate --to edge``."""
    fresh = TiermemConfig.for_data_dir(tmp_path / "new")
    assert fresh.mtm == EdgeStoreConfig(path=tmp_path / "new" / "edge")
    assert load_config(None, {"TIERMEM_DATA_DIR": str(tmp_path / "new")}).mtm == fresh.mtm
    (tmp_path / "old" / "qdrant").mkdir(parents=True)
    old = TiermemConfig.for_data_dir(tmp_path / "old")
    assert old.mtm == QdrantConfig(location="path", path=tmp_path / "old" / "qdrant")
    (tmp_path / "old" / "edge").mkdir()  # migrated: the shards win
    assert isinstance(TiermemConfig.for_data_dir(tmp_path / "old").mtm, EdgeStoreConfig)


def test_an_mtm_section_with_qdrants_own_settings_and_no_kind_is_qdrant(tmp_path: Path) -> None:
    """Configuration files written when Qdrant was the default name a server without a kind;
    they still mean Qdrant. ``kind = "qdrant"`` alone is local mode under the data directory."""
    toml = tmp_path / "tiermem.toml"
    toml.write_text('[mtm]\nlocation = "url"\nurl = "http://qdrant:6333"\n')
    served = load_config(toml, {"TIERMEM_DATA_DIR": str(tmp_path)}).mtm
    assert isinstance(served, QdrantConfig)
    assert (served.location, served.url) == ("url", "http://qdrant:6333")
    env = {"TIERMEM_DATA_DIR": str(tmp_path), "TIERMEM_MTM__URL": "http://q:6333"}
    assert load_config(None, {**env, "TIERMEM_MTM__LOCATION": "url"}).mtm.kind == "qdrant"
    local = load_config(None, {"TIERMEM_DATA_DIR": str(tmp_path), "TIERMEM_MTM__KIND": "qdrant"})
    assert local.mtm == QdrantConfig(location="path", path=tmp_path / "qdrant")
    capacity = load_config(None, {"TIERMEM_DATA_DIR": str(tmp_path), "TIERMEM_MTM__CAPACITY": "9"})
    assert capacity.mtm == EdgeStoreConfig(path=tmp_path / "edge", capacity=9)
    # a path alone: Edge's, unless local mode wrote it (its meta.json)
    shards, old = tmp_path / "shards", tmp_path / "old-qdrant"
    old.mkdir()
    (old / "meta.json").write_text("{}")
    for where, kind in ((shards, EdgeStoreConfig), (old, QdrantConfig)):
        mtm = load_config(None, {"TIERMEM_MTM__PATH": str(where)}).mtm
        assert isinstance(mtm, kind)
        assert mtm.path == where


def test_a_store_is_named_by_an_mtm_section_or_an_mtm_variable(tmp_path: Path) -> None:
    """``names_store``: what decides whether the data directory's embedded store is opened."""
    from tiermem.settings import names_store

    read_only = tmp_path / "read.toml"
    read_only.write_text("[delivery]\ntokens_per_hit = 12\n")
    named = tmp_path / "named.toml"
    named.write_text('[mtm]\nkind = "qdrant"\n')
    assert not names_store(None, {"TIERMEM_DATA_DIR": str(tmp_path)})
    assert not names_store(read_only, {})
    assert names_store(named, {})
    assert names_store(read_only, {"TIERMEM_MTM__CAPACITY": "9"})
    assert not names_store(read_only, {"tiermem_mtm__capacity": "9"})  # load_config skips it


def test_kind_edge_in_a_config_file_keeps_its_shards_under_the_data_directory(
    tmp_path: Path,
) -> None:
    toml = tmp_path / "tiermem.toml"
    toml.write_text(f'data_dir = "{tmp_path / "data"}"\n[mtm]\nkind = "edge"\n')
    config = load_config(toml, {})
    assert config.mtm == EdgeStoreConfig(path=tmp_path / "data" / "edge")
    env = load_config(None, {"TIERMEM_DATA_DIR": str(tmp_path), "TIERMEM_MTM__KIND": "edge"})
    assert isinstance(env.mtm, EdgeStoreConfig)
    assert env.mtm.path == tmp_path / "edge"
    store = build_mtm_store(config.mtm, DIM, EMBEDDER.name)
    assert store.count("ana") == 0
    store.upsert("ana", _entries("ana", 1), np.ones((1, DIM), dtype=np.float32))
    store.close()
    assert _shards(tmp_path / "data" / "edge") == [collection_name("tiermem_mtm_", "ana")]
