"""``tiermem bench consolidation`` on a fixture with a scripted model: runs, growth, the
update-gap groups and the add() latency probe are all produced and add up."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from tiermem.bench.consolidation import PROBE_USER, answer_coverage, run

from tests.engine.test_bench_locomo import FIXTURE
from tests.fakes.scripted import KIND, ScriptedModels


def test_the_suite_runs_end_to_end_on_a_fixture(
    tmp_path: Path, scripted_models: ScriptedModels
) -> None:
    node = {"name": "cat", "kind": "Concept", "text": "a pet", "action": "insert", "anchor": 0}
    scripted_models.serve("consolidator", {"nodes": [node], "edges": []})
    data = tmp_path / "fx.json"
    data.write_text(json.dumps(FIXTURE))
    result = run(
        data,
        0,
        sessions=1,
        later=1,
        model="scripted",
        questions=10,
        k=3,
        batch_size=2,
        chunk_size=1,
        out=tmp_path / "out",
        console=Console(quiet=True),
        probes=3,
        overrides={
            "embedder": {"provider": "hash", "model": "hash-384"},
            "ltm": {"consolidation": {"backend": {"kind": KIND, "model": "consolidator"}}},
        },
    )
    assert [r["entries"] for r in result["runs"]] == [2, 1]  # 3 turns in batches of 2
    assert result["turns"] == 3
    assert result["nodes"] == 1
    assert result["nodes_per_100_turns"] == 100 / 3
    groups = {(g["group"], g["variant"]): g for g in result["update_gap"]}
    assert groups[("consolidated", "MTM only")]["questions"] == 3
    assert groups[("not yet consolidated", "both")]["questions"] == 1
    assert groups[("consolidated", "LTM only")]["recall"] == 0.0
    assert groups[("consolidated", "MTM only")]["recall"] > 0
    assert result["add_latency"]["idle_ms"]["n"] == 3
    saved = json.loads((tmp_path / "out" / "consolidation.json").read_text())
    assert saved["nodes"] == 1
    assert PROBE_USER not in json.dumps(saved["sample_facts"])


def test_answer_coverage_counts_normalised_gold_tokens() -> None:
    assert answer_coverage("Mahler, Friday", "- The orchestra plays Mahler on Friday.") == 1.0
    assert answer_coverage("Mahler, Friday", "- Mahler") == 0.5
    assert answer_coverage("", "anything") == 0.0
