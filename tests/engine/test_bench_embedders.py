"""``tiermem bench embedders``: each embedder's cost on the first turns of a file, the
baseline first, written as JSON; bad arguments are typed errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from tiermem.bench import BenchInputError
from tiermem.bench.datasets import load_dataset
from tiermem.bench.embedders import _sessions, main
from tiermem.cli import main as cli
from tiermem.config import EmbedderConfig

from tests.engine.test_bench_locomo import FIXTURE


@pytest.fixture
def fixture_file(tmp_path: Path) -> Path:
    path = tmp_path / "fx.json"
    path.write_text(json.dumps(FIXTURE))
    return path


def test_the_first_turns_are_cut_across_sessions(fixture_file: Path) -> None:
    conversations, _ = load_dataset(fixture_file)
    total = sum(len(s.turns) for c in conversations for s in c.sessions)
    pieces = _sessions(conversations, total - 1)
    assert sum(len(s.turns) for _, s in pieces) == total - 1
    assert len(pieces) == sum(len(c.sessions) for c in conversations)  # the last one cut
    assert sum(len(s.turns) for _, s in _sessions(conversations, 10 * total)) == total


def test_every_embedder_is_measured_after_the_baseline(fixture_file: Path, tmp_path: Path) -> None:
    baseline = EmbedderConfig(provider="hash", dim=64)
    other = EmbedderConfig(provider="hash", dim=32)
    out = tmp_path / "rows.json"
    rows = main([fixture_file], [baseline, other], 5, 2, out, Console(width=200), baseline)
    assert [(r.embedder, r.dim, r.turns) for r in rows] == [("hash-64", 64, 5), ("hash-32", 32, 5)]
    for row in rows:
        assert row.embed_s_per_1000 > 0
        assert row.add_s_per_1000 > 0
        assert row.query_p50_ms <= row.query_p95_ms
    assert [r["dim"] for r in json.loads(out.read_text())] == [64, 32]


def test_no_data_or_a_bad_count_is_refused(
    fixture_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(BenchInputError, match="no data set"):
        main([], [], 5, 2, None, Console())
    assert cli(["bench", "embedders", "--data", str(fixture_file), "--turns", "0"]) != 0
    assert "--turns must be positive" in capsys.readouterr().out
