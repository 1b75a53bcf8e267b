"""The knowledge graph records the embedder that wrote its vectors: another one is a typed
error when it opens, and ``tiermem reindex --ltm`` embeds the graph's texts again."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tiermem import Memory
from tiermem.cli import main
from tiermem.embedding import EmbedMode
from tiermem.embedding.hashing import HashEmbedder
from tiermem.errors import LTMEmbedderMismatchError, LTMLockedError
from tiermem.ltm import LongTermMemory
from tiermem.ltm.store import reembed
from tiermem.settings import load_config
from tiermem.types import Tier

from tests.engine.test_ltm import DIM, PROV, T0, commit, n


def saved(path: Path, embedder: str | None, when: datetime = T0) -> None:
    ltm = LongTermMemory(path, DIM, PROV, embedder=embedder)
    commit(ltm, "alice", [n("pottery", 0), n("kiln", 1)], when=when)
    ltm.close()


def recorded(path: Path) -> object:
    return json.loads((path / "graph.json").read_text())["embedder"]


def test_a_graph_records_its_embedder_and_refuses_another(tmp_path: Path) -> None:
    saved(tmp_path, "hash-8")
    assert recorded(tmp_path) == "hash-8"
    with pytest.raises(LTMEmbedderMismatchError, match=r"embedded by hash-8, but the configured"):
        LongTermMemory(tmp_path, DIM, PROV, embedder="other-8")
    assert LongTermMemory(tmp_path, DIM, PROV, embedder="hash-8").node_count == 2
    assert LongTermMemory(tmp_path, DIM, PROV, read_only=True).node_count == 2  # unchecked


def test_a_graph_saved_before_the_record_is_adopted_and_recorded(tmp_path: Path) -> None:
    saved(tmp_path, None)
    assert recorded(tmp_path) is None
    ltm = LongTermMemory(tmp_path, DIM, PROV, embedder="hash-8")
    commit(ltm, "bob", [n("glaze", 2)])
    ltm.close()
    assert recorded(tmp_path) == "hash-8"


def test_reembed_writes_the_new_embedders_vectors_and_record(tmp_path: Path) -> None:
    saved(tmp_path, "old-8")
    embedder = HashEmbedder(16)
    assert reembed(tmp_path, embedder) == 2
    assert recorded(tmp_path) == embedder.name
    ltm = LongTermMemory(tmp_path, 16, PROV, embedder=embedder.name, read_only=True)
    query = embedder.embed(["about kiln"], EmbedMode.QUERY)[0]
    assert ltm.search(query, 1, T0)[0].text == "kiln (Concept): about kiln"
    assert reembed(tmp_path / "elsewhere", embedder) == 0


def test_reembed_waits_for_no_one_while_a_writer_holds_the_graph(tmp_path: Path) -> None:
    saved(tmp_path, "old-8")
    before = (tmp_path / "graph.json").read_bytes()
    holder = LongTermMemory(tmp_path, DIM, PROV, embedder="old-8")
    try:
        with pytest.raises(LTMLockedError):
            reembed(tmp_path, HashEmbedder(16))
    finally:
        holder.close()
    assert (tmp_path / "graph.json").read_bytes() == before


def test_the_cli_reindexes_the_ltm_so_the_memory_opens_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ltm_dir = tmp_path / "ltm"
    saved(ltm_dir, "old-8", datetime.now(UTC))  # recent: its confidence has not decayed
    toml = tmp_path / "tiermem.toml"
    toml.write_text(
        f'data_dir = "{tmp_path / "data"}"\n[embedder]\nkind = "hash"\ndim = 16\n'
        f'[ltm]\nenabled = true\npath = "{ltm_dir}"\n'
        "[ltm.consolidation]\ninterval_minutes = 0\n"  # no job runs: its model is never called
        '[ltm.consolidation.backend]\nkind = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n'
    )
    config = load_config(toml, {})
    with pytest.raises(LTMEmbedderMismatchError):
        Memory(config)
    assert main(["reindex", "--ltm", "--config", str(toml)]) == 0
    assert "reindexed 2 graph items with hash-16" in capsys.readouterr().out
    with Memory(config) as memory:
        memory.add([{"role": "user", "content": "The weather was nice today."}], "maya")
        hits = [
            h for h in memory.search("about kiln", "maya", k=5) if h.tier is Tier.LTM
        ]  # LTM takes at most 30 % of k
    assert hits[0].fact.text == "kiln (Concept): about kiln"
