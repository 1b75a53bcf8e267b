"""``tiermem migrate --to edge``: a data directory written in embedded mode reads the same on
Qdrant Edge shards (entries, access counts, supersede links, searches), a run stopped half
way is finished by the next, and a store another embedder wrote is refused."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from tiermem import ManualClock, Memory
from tiermem.cli import main
from tiermem.config import EdgeStoreConfig
from tiermem.errors import EmbedderMismatchError
from tiermem.migrate import run_migrate
from tiermem.settings import load_config
from tiermem.stores.edge import EdgeStore
from tiermem.types import MemoryEntry, SearchFilters

from tests.conftest import T0, chat, config_for

USERS = {
    "ana": ["I keep bees on the roof.", "My sister lives in Lisbon.", "I play the oboe."],
    "bob": ["I sail on Sundays.", "My boat is called Sardinha."],
    "cy": ["I will be forgotten."],
}
CONFIG = '[embedder]\nkind = "hash"\nmodel = "hash-384"\n'


def _fill(root: Path) -> None:
    memory = Memory(config_for("path", root), clock=ManualClock(T0))
    for user, said in USERS.items():
        for text in said:
            memory.add(chat(("user", text)), user_id=user)
    old = memory.get_all("ana")[0]
    memory.update(old.id, "I keep bees on the roof and in the garden.", "ana")
    memory.search("bees", "ana")  # access counts move too
    memory.forget_user("cy")
    memory.close()


QUERIES = {"ana": "who lives in Lisbon", "bob": "what is my boat called", "cy": "forgotten"}


def _open(root: Path, location: str) -> Memory:
    return Memory(config_for(location, root), clock=ManualClock(T0))


def _entries(root: Path, location: str) -> dict[str, list[MemoryEntry]]:
    with _open(root, location) as memory:
        every = SearchFilters(include_superseded=True)
        return {user: memory.get_all(user, every) for user in USERS}


def _searches(root: Path, location: str) -> dict[str, list[tuple[str, float]]]:
    """Each user's best hit (below it, entries that share no word with the query tie at a
    cosine of 0, in an order that is each store's own)."""
    with _open(root, location) as memory:
        return {
            user: [(h.entry.text, round(h.score, 4)) for h in memory.search(query, user, k=1)]
            for user, query in QUERIES.items()
        }


def _migrate(root: Path, config: Path) -> str:
    out = io.StringIO()
    run_migrate(config, root, "edge", 5, Console(file=out, width=200))
    return out.getvalue()


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "tiermem.toml"
    path.write_text(CONFIG)
    return path


def test_a_migrated_data_directory_reads_the_same_on_edge(tmp_path: Path, config: Path) -> None:
    root = tmp_path / "data"
    _fill(root)
    before = _entries(root, "path")
    said = _migrate(root, config)
    assert "moved 2 users (5 entries)" in said  # cy was forgotten: the journal has no cy
    assert _entries(root, "edge") == before
    # the file names no store: the data directory's default is the shards from now on
    assert "the data directory opens them from now on" in said
    assert isinstance(load_config(config, {"TIERMEM_DATA_DIR": str(root)}).mtm, EdgeStoreConfig)
    assert (root / "qdrant").is_dir()  # the source is left as it was
    again = _migrate(root, config)  # a second run moves nothing and checks everything
    assert "moved 0 users (0 entries)" in again
    assert "2 were there already" in again
    # the same hits and scores through the whole read path (each search counts its hits
    # in its own store only)
    found = _searches(root, "edge")
    assert found == _searches(root, "path")
    assert len(found["ana"] + found["bob"]) == 2


def test_a_configuration_that_names_local_mode_is_told_to_name_edge(tmp_path: Path) -> None:
    root = tmp_path / "data"
    _fill(root)
    named = tmp_path / "local.toml"
    named.write_text(CONFIG + '[mtm]\nkind = "qdrant"\n')
    said = _migrate(root, named)
    assert f'set [mtm] kind = "edge" (path = "{root / "edge"}") to use them' in said
    assert load_config(named, {"TIERMEM_DATA_DIR": str(root)}).mtm.kind == "qdrant"


def test_a_migration_stopped_half_way_is_finished_by_the_next_run(
    tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "data"
    _fill(root)
    before = _entries(root, "path")
    replace = EdgeStore.replace_user
    moved: list[str] = []

    def stop_at_the_second(self: EdgeStore, user_id: str, *args: object) -> None:
        if moved:
            raise KeyboardInterrupt
        moved.append(user_id)
        replace(self, user_id, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(EdgeStore, "replace_user", stop_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        _migrate(root, config)
    monkeypatch.undo()
    said = _migrate(root, config)
    assert "moved 1 users" in said
    assert "1 were there already" in said
    assert _entries(root, "edge") == before


def test_the_command_line_and_a_store_of_another_embedder(tmp_path: Path, config: Path) -> None:
    root = tmp_path / "data"
    _fill(root)
    assert main(["migrate", "--to", "edge", "--data-dir", str(root), "--config", str(config)]) == 0
    shards = EdgeStore(root / "edge", dim=384, prefix="tiermem_mtm_", embedder="hash-384")
    assert shards.count("ana") == 3
    shards.close()
    other = tmp_path / "other.toml"
    other.write_text('[embedder]\nkind = "hash"\nmodel = "hash-64"\ndim = 64\n')
    with pytest.raises(EmbedderMismatchError):
        _migrate(root, other)
    assert main(["migrate", "--to", "edge", "--data-dir", str(tmp_path / "none")]) == 2
