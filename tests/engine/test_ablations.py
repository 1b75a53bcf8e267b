"""Ablation mechanics on a fixture: MTM growth padding, noisy controller, noisy writer."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from tiermem import Memory, TiermemConfig
from tiermem.bench.ablations import NoisyPlanner, _noisy_writer_copy, mtm_growth
from tiermem.bench.datasets.locomo import load_locomo
from tiermem.config import EmbedderConfig
from tiermem.roles.plan import PlanIntent, PlannedQuery
from tiermem.types import MemoryKind, SearchFilters

from tests.engine.test_bench_locomo import FIXTURE

HASH = TiermemConfig(embedder=EmbedderConfig(provider="hash"))


def test_growth_pads_to_each_size_and_measures_both_paths(tmp_path: Path) -> None:
    other = json.loads(json.dumps(FIXTURE[0]))
    other["sample_id"] = "fx-2"
    path = tmp_path / "two.json"
    path.write_text(json.dumps([FIXTURE[0], other]))
    samples, _ = load_locomo(path)
    rows = mtm_growth(
        samples, samples[0], HASH, [5, 30], questions=10, k=2, console=Console(quiet=True)
    )
    assert [r.variant for r in rows] == ["tiermem", "vector top-K"] * 2
    # Padded to 5 and 30 turns: one entry per turn plus at most one exchange per next turn.
    for size, (with_k, plain) in zip([5, 30], [rows[:2], rows[2:]], strict=True):
        assert with_k.entries == plain.entries
        assert size < with_k.entries < 2 * size
    assert all(r.questions == 4 for r in rows)  # categories 1-4 with ingested evidence
    assert all(0.0 <= r.recall <= 1.0 for r in rows)
    assert rows[0].recall > 0


class _Fixed:
    name = "fixed"

    def plan(self, query, stm, filters, now):  # type: ignore[no-untyped-def]
        queries = [PlannedQuery(query)] + [PlannedQuery(f"model query {i}") for i in range(3)]
        return PlanIntent(tuple(queries), filters, "model")


def test_noisy_planner_spares_the_users_query_and_noises_about_half() -> None:
    noisy = NoisyPlanner(_Fixed(), ["NOISE"], rate=0.5, seed=3)
    replaced = kept = 0
    for _ in range(200):
        plan = noisy.plan("my question", (), SearchFilters(), datetime(2026, 1, 1, tzinfo=UTC))
        assert plan.queries[0].text == "my question"
        replaced += sum(q.text == "NOISE" for q in plan.queries[1:])
        kept += sum(q.text != "NOISE" for q in plan.queries[1:])
    assert 0.4 < replaced / (replaced + kept) < 0.6


def test_noisy_writer_copy_corrupts_writer_entries_only_and_keeps_the_original(
    tmp_path: Path,
) -> None:
    config = TiermemConfig.for_data_dir(tmp_path / "clean")
    config = config.model_copy(update={"embedder": EmbedderConfig(provider="hash")})
    clean = Memory(config)
    clean.add("I play the oboe.", user_id="u")  # a verbatim turn entry: never corrupted
    c = clean.components
    from tiermem.pipeline.commit import embed_entries
    from tiermem.pipeline.write import materialise
    from tiermem.roles.extract import CandidateEntry

    facts = [CandidateEntry(f"fact number {i}", MemoryKind.FACT, (), None, None) for i in range(40)]
    entries = [p.entry for p in materialise(facts, "u", c.clock.now())]
    c.store.upsert("u", entries, embed_entries(c, entries))
    noisy = _noisy_writer_copy(
        tmp_path / "clean", tmp_path / "noisy", "u", HASH, ["NOISE"], rate=0.5
    )
    texts = [e.text for e in noisy.get_all("u")]
    assert "user: I play the oboe." in texts
    assert 10 < texts.count("NOISE") < 30
    assert "NOISE" not in [e.text for e in clean.get_all("u")]
    noisy.close()
    clean.close()
