"""``tiermem bench mtm`` runs to its table on a small size: both stores, every column."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console
from tiermem.bench.mtm import main


def test_bench_mtm_measures_both_stores(tmp_path: Path) -> None:
    out = tmp_path / "mtm.json"
    rows = main([30], 3, "hash", out, Console(file=io.StringIO()), users=2)
    assert [r.store for r in rows] == ["qdrant-embedded", "exact-reference"]
    for row in rows:
        assert row.users == 2
        assert row.add_p50_ms > 0
        assert row.context_p50_ms > 0
        assert row.store_calls_per_add >= 1
        assert row.journal_calls_per_context >= 1
        assert row.rss_mib > 0
    assert len(json.loads(out.read_text())) == 2
