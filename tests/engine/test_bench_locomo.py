"""tiermem bench locomo on a fixture made here: records, metrics, report, plots, --resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from tiermem.bench.locomo import Answerer, RunConfig, run
from tiermem.config import EmbedderConfig
from tiermem.slm.meter import Meter
from tiermem.slm.roles.common import RoleRuntime
from tiermem.slm.scripted import ScriptedBackend

pytestmark = pytest.mark.slow  # whole benchmark runs

FIXTURE = [
    {
        "sample_id": "fx-1",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "9:05 am on 3 June, 2024",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat called Tofu."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "I play the oboe in an orchestra."},
                {"speaker": "Ana", "dia_id": "D1:3", "text": "My sister bakes bread in Lisbon."},
            ],
            "session_2_date_time": "6:40 pm on 20 June, 2024",
            "session_2": [
                {
                    "speaker": "Ben",
                    "dia_id": "D2:1",
                    "text": "The orchestra plays Mahler on Friday.",
                },
                {"speaker": "Ana", "dia_id": "D2:2", "text": "Tofu turned two yesterday."},
            ],
        },
        "qa": [
            {
                "question": "What is the name of Ana's cat?",
                "answer": "Tofu",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "Which instrument does Ben play in the orchestra?",
                "answer": "oboe",
                "evidence": ["D1:2"],
                "category": 4,
            },
            {
                "question": "Where does Ana's sister bake bread?",
                "answer": "Lisbon",
                "evidence": ["D1:3"],
                "category": 4,
            },
            {
                "question": "What does the orchestra play, and when?",
                "answer": "Mahler, Friday",
                "evidence": ["D2:1"],
                "category": 1,
            },
            {
                "question": "What is Ben's dog called?",
                "adversarial_answer": "Tofu",
                "evidence": ["D1:1"],
                "category": 5,
            },
        ],
    }
]


def _config(tmp_path: Path, **overrides: Any) -> RunConfig:
    data = tmp_path / "fx.json"
    data.write_text(json.dumps(FIXTURE))
    return RunConfig(
        data=data, out=tmp_path / "out", k=2, embedder=EmbedderConfig(kind="hash"), **overrides
    )


def _records(cfg: RunConfig) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (cfg.out / "records.jsonl").read_text().splitlines()]


def test_every_system_answers_every_question_with_measured_recall(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    results = run(cfg, Console(quiet=True))
    records = _records(cfg)
    assert len(records) == 5 * 5
    full = [r for r in records if r["system"] == "full-context"]
    assert all(r["recall"] == 1.0 for r in full if r["category"] != "adversarial")
    assert all(len(r["delivered"]) == 5 for r in full)
    bm25 = {r["index"]: r for r in records if r["system"] == "bm25"}
    assert bm25[1]["delivered"][0] == "D1:2"  # "oboe"/"orchestra" match lexically
    assert bm25[1]["recall"] == 1.0
    # hybrid fuses the two rankings: on this fixture BM25's first is in its top two (only
    # D2:1, which BM25 also ranks, could outrank it)
    hybrid = {r["index"]: r for r in records if r["system"] == "hybrid"}
    assert "D1:2" in hybrid[1]["delivered"][:2]
    assert all(h["context_tokens"] > 0 for h in hybrid.values())
    for r in records:
        assert len(r["delivered"]) <= (5 if r["system"] == "full-context" else 2 * 2)
        assert r["context_tokens"] > 0
    summary = results["summary"]["overall"]
    assert summary["full-context"]["recall"] == 1.0
    assert summary["full-context"]["questions"] == 4  # the adversarial one is reported apart
    assert results["seed"] == 0
    assert results["versions"]["qdrant-client"] != "not installed"
    report = (cfg.out / "report.md").read_text()
    for heading in (
        "## Headline (headline questions)",
        "## Evidence recall by question group",
        "## Build cost per conversation",
        "## Data quirks met",
    ):
        assert heading in report
    assert "questions without 'answer' (adversarial) | 1" in report
    for png in ("recall_vs_tokens.png", "latency.png"):
        assert (cfg.out / png).read_bytes()[:4] == b"\x89PNG"


def test_answers_are_scored_with_f1_bleu_and_judge(tmp_path: Path) -> None:
    cfg = _config(tmp_path, systems=("bm25",))
    answers = ScriptedBackend(default=lambda r: {"answer": "Tofu"})
    verdicts = ScriptedBackend(default=lambda r: {"reasoning": "same", "verdict": "CORRECT"})
    meter = Meter()
    answerer = Answerer(RoleRuntime(answers, meter), RoleRuntime(verdicts, meter), 4000)
    results = run(cfg, Console(quiet=True), answerer)
    by_index = {r["index"]: r for r in _records(cfg)}
    assert by_index[0]["f1"] == 1.0
    assert by_index[0]["bleu1"] == 1.0
    assert by_index[2]["f1"] == 0.0  # "Tofu" for "Lisbon"
    assert by_index[4]["f1"] == 0.0  # an adversarial question answered instead of declined
    assert results["summary"]["overall"]["bm25"]["judge_accuracy"] == 1.0
    assert results["summary"]["overall"]["bm25"]["f1"] == pytest.approx(1 / 4)


def test_resume_continues_an_interrupted_run(tmp_path: Path) -> None:
    cfg = _config(tmp_path, systems=("bm25", "naive-rag"))
    run(cfg, Console(quiet=True))
    complete = _records(cfg)
    lines = (cfg.out / "records.jsonl").read_text().splitlines()
    # Interrupted after six records, the seventh cut in half by the stop.
    (cfg.out / "records.jsonl").write_text("\n".join(lines[:6]) + "\n" + lines[6][:25])
    cfg.resume = True
    run(cfg, Console(quiet=True))
    resumed = _records(cfg)
    assert len(resumed) == len(complete) == 10
    key = lambda r: (r["system"], r["index"])  # noqa: E731
    assert sorted(map(key, resumed)) == sorted(map(key, complete))
    assert resumed[:6] == complete[:6]  # what was done is kept, not redone
    builds = (cfg.out / "builds.jsonl").read_text().splitlines()
    assert len(builds) == 2  # one build record per system, not one per attempt


def test_budgets_are_ceilings_every_system_meets_in_its_own_order(tmp_path: Path) -> None:
    cfg = _config(tmp_path, budgets=(25, 1000))
    results = run(cfg, Console(quiet=True))
    records = _records(cfg)
    for name in ("tiermem", "naive-rag", "bm25", "hybrid"):
        mine = [r for r in records if r["system"] == name]
        assert sorted({r["budget"] for r in mine}) == [25, 1000]
        for r in mine:
            assert 0 < r["context_tokens"] <= r["budget"]
        small = [r for r in mine if r["budget"] == 25]
        large = [r for r in mine if r["budget"] == 1000]
        assert max(len(r["delivered"]) for r in small) < max(len(r["delivered"]) for r in large)
        # The whole conversation fits in 1,000 tokens: every turn is delivered, once.
        assert all(sorted(r["delivered"]) == sorted(set(r["delivered"])) for r in large)
        # naive-rag ranks every turn; bm25 only those sharing a word; tiermem cuts the
        # hits that no retriever scored near its best.
        assert all(len(r["delivered"]) == 5 for r in large if name in ("naive-rag", "hybrid"))
        assert all(r["delivered"] for r in large)
    full = [r for r in records if r["system"] == "full-context"]
    assert [r["budget"] for r in full] == [None] * 5  # measured once, whole
    summary = results["summary"]
    assert summary["headline_budget"] == 1000
    assert set(summary["curve"]) == {"tiermem", "naive-rag", "bm25", "hybrid"}
    assert summary["curve"]["bm25"][25]["overall"]["context_tokens"] <= 25
    assert summary["overall"]["tiermem"]["recall"] == 1.0  # read at the headline budget
    report = (cfg.out / "report.md").read_text()
    assert "## Recall vs delivered tokens (headline questions)" in report
    assert "## Worst-served questions (tiermem, headline budget)" in report
    assert "| bm25 | 25 |" in report
    # Budgeted context reads as sessions under one date each.
    line = next(r for r in records if r["system"] == "naive-rag" and r["budget"] == 1000)
    assert line["context_tokens"] > 0


def test_a_run_resumes_budget_by_budget(tmp_path: Path) -> None:
    cfg = _config(tmp_path, systems=("bm25",), budgets=(25, 1000))
    run(cfg, Console(quiet=True))
    complete = _records(cfg)
    lines = (cfg.out / "records.jsonl").read_text().splitlines()
    (cfg.out / "records.jsonl").write_text("\n".join(lines[:3]) + "\n")
    cfg.resume = True
    run(cfg, Console(quiet=True))
    key = lambda r: (r["index"], r["budget"])  # noqa: E731
    assert sorted(map(key, _records(cfg))) == sorted(map(key, complete))


def test_the_model_plays_only_the_roles_asked(tmp_path: Path) -> None:
    """``--roles controller``: the controller's queries measured alone, writer and selector
    model-free (the report says which roles the model played)."""
    from tiermem.bench.locomo import _system

    cfg = _config(tmp_path, model="qwen0.5b", roles=("controller",))
    system = _system("tiermem", cfg, None)
    slm = system._config.slm  # type: ignore[attr-defined]
    assert slm.backend.model == "qwen0.5b"
    assert (slm.controller.enabled, slm.selector.enabled, slm.writer.enabled) == (
        True,
        False,
        False,
    )
    free = _system("tiermem", _config(tmp_path), None)._config.slm  # type: ignore[attr-defined]
    assert free.backend.kind == "none"


def test_tiermem_on_edge_delivers_what_it_delivers_on_embedded_qdrant(tmp_path: Path) -> None:
    """``--config`` with ``[mtm] kind = "edge"``: the run keeps Edge shards under its state
    directory, and every question at every budget gets the same turns as on local mode."""
    pytest.importorskip("qdrant_edge")
    from tiermem.config import EdgeStoreConfig, QdrantConfig, TiermemConfig

    records = {}
    local = QdrantConfig(location="path", path=tmp_path / "unused")
    for kind, mtm in (("local", local), ("edge", EdgeStoreConfig(path=tmp_path / "unused"))):
        tiermem = TiermemConfig(mtm=mtm)
        (tmp_path / kind).mkdir()
        cfg = _config(tmp_path / kind, systems=("tiermem",), budgets=(25, 1000), tiermem=tiermem)
        run(cfg, Console(quiet=True))
        records[kind] = [(r["index"], r["budget"], r["delivered"]) for r in _records(cfg)]
    assert records["edge"] == records["local"]
    assert len(records["edge"]) == 2 * 5
    shards = (tmp_path / "edge" / "out" / "state" / "fx-1" / "edge").glob("tiermem_mtm_*")
    assert len(list(shards)) == 1  # the one user's shard, where the run keeps its state
    assert not (tmp_path / "edge" / "out" / "state" / "fx-1" / "qdrant").exists()
    assert (tmp_path / "local" / "out" / "state" / "fx-1" / "qdrant" / "meta.json").is_file()
    assert not (tmp_path / "local" / "out" / "state" / "fx-1" / "edge").exists()
    assert not (tmp_path / "unused").exists()


def test_a_config_file_that_names_no_store_resumes_on_the_states_own(tmp_path: Path) -> None:
    """``--config`` with read-path settings only, resuming a run whose state local mode wrote
    (before Edge was the default): the questions are answered from that store, not from an
    empty Edge store that the default data directory's settings would put beside it."""
    from tiermem.bench.cli import run_config
    from tiermem.config import QdrantConfig, TiermemConfig

    local = TiermemConfig(mtm=QdrantConfig(location="path", path=tmp_path / "unused"))
    cfg = _config(tmp_path, systems=("tiermem",), budgets=(1000,), tiermem=local)
    run(cfg, Console(quiet=True))
    first = [(r["index"], r["delivered"]) for r in _records(cfg)]
    (cfg.out / "records.jsonl").unlink()  # answered again, over the memories already stored
    settings = tmp_path / "read.toml"
    settings.write_text("[delivery]\ntokens_per_hit = 12\n")
    cfg.tiermem, cfg.resume = run_config(settings), True
    assert cfg.tiermem.delivery.tokens_per_hit == 12
    run(cfg, Console(quiet=True))
    again = [(r["index"], r["delivered"]) for r in _records(cfg)]
    assert again == first
    assert sum(len(delivered) for _, delivered in again) > 0
    assert not (cfg.out / "state" / "fx-1" / "edge").exists()
    named = tmp_path / "edge.toml"
    named.write_text('[mtm]\nkind = "edge"\n')
    assert run_config(named).mtm.kind == "edge"  # a store the file names is kept
