"""``tiermem bench mtm`` runs to its table on a small size: both stores, every column."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from tiermem.bench.mtm import main
from tiermem.errors import InvalidInputError


def test_bench_mtm_measures_every_store_in_one_run(tmp_path: Path) -> None:
    out = tmp_path / "mtm.json"
    console = Console(file=io.StringIO(), width=250)
    rows = main([30], 3, "hash", out, console, users=2)
    assert [r.store for r in rows] == [
        "qdrant-embedded",
        "qdrant-edge",
        "qdrant-edge-graph",
        "exact-reference",
    ]
    for row in rows:
        assert row.users == 2
        assert row.add_p50_ms > 0
        assert row.context_p50_ms > 0
        assert row.store_calls_per_add >= 1
        assert row.journal_calls_per_context >= 1
        assert row.rss_mib > 0
        assert row.rss_end_mib > 0
        assert row.first_search_s > 0
    on_disk = {r.store: r.disk_mib for r in rows}
    assert on_disk["qdrant-embedded"] > 0
    assert on_disk["qdrant-edge"] > 0
    assert on_disk["exact-reference"] == 0
    graphed = {r.store: (r.graph_s > 0, r.graph_indexed) for r in rows}
    assert graphed["qdrant-edge-graph"] == (True, 0)  # optimized: 30 entries stay plain
    assert graphed["qdrant-edge"] == (False, 0)
    assert len(json.loads(out.read_text())) == 4
    table = console.file.getvalue()  # type: ignore[attr-defined]
    assert "qdrant-edge" in table
    assert "+ graph" in table
    assert "1.00x" in table  # the reference against itself


def test_bench_mtm_runs_the_stores_asked_for_and_refuses_others(tmp_path: Path) -> None:
    console = Console(file=io.StringIO(), width=250)
    rows = main([20], 2, "hash", None, console, stores=["qdrant-edge"])
    assert [r.store for r in rows] == ["qdrant-edge"]
    with pytest.raises(InvalidInputError, match="known: qdrant-embedded, qdrant-edge"):
        main([20], 2, "hash", None, console, stores=["sqlite"])
