"""``tiermem bench locomo`` on several data sets in one command: a folder and a table per file,
a bursty variant as a data set of its own, one summary, question types as report groups,
empty messages counted as a quirk, the fixed split, and --resume per file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from tiermem.bench.locomo import RunConfig, run
from tiermem.bench.suite import dataset_configs, run_all
from tiermem.config import EmbedderConfig

from tests.engine.test_bench_locomo import FIXTURE

pytestmark = pytest.mark.slow  # whole benchmark runs

HASH = EmbedderConfig(kind="hash")


def _longmemeval_like() -> list[dict[str, Any]]:
    """FIXTURE as LongMemEval S looks once converted: a user and an assistant, a question
    type on every question, and messages that are empty or only a zero-width space."""
    sample = json.loads(json.dumps(FIXTURE[0]))
    sample["sample_id"] = "lme-1"
    conversation = sample["conversation"]
    conversation["speaker_a"], conversation["speaker_b"] = "User", "Assistant"
    for key in ("session_1", "session_2"):
        for turn in conversation[key]:
            turn["speaker"] = "User" if turn["speaker"] == "Ana" else "Assistant"
    conversation["session_1"].insert(1, {"speaker": "Assistant", "dia_id": "D1:9", "text": ""})
    conversation["session_2"].append({"speaker": "User", "dia_id": "D2:9", "text": "\u200b"})
    types = ["single-session-user", "single-session-user", "knowledge-update", "multi-session"]
    sample["qa"] = [{**q, "question_type": t} for q, t in zip(sample["qa"][:4], types, strict=True)]
    return [sample]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    locomo, lme = tmp_path / "locomo_fx.json", tmp_path / "lme_fx.json"
    locomo.write_text(json.dumps(FIXTURE))
    lme.write_text(json.dumps(_longmemeval_like()))
    return locomo, lme


def _base(tmp_path: Path, **overrides: Any) -> RunConfig:
    settings: dict[str, Any] = {"k": 2, "budgets": (25, 1000), "embedder": HASH, **overrides}
    return RunConfig(data=Path(), out=tmp_path / "out", **settings)


def _records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (folder / "records.jsonl").read_text().splitlines()]


def test_every_file_is_run_into_its_own_folder_and_summed_up(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    locomo, lme = files
    configs = dataset_configs(_base(tmp_path), [locomo, lme], [lme])
    result = run_all(configs, tmp_path / "out", Console(quiet=True))
    out = tmp_path / "out"
    for name in ("locomo_fx", "lme_fx", "lme_fx-bursty"):
        assert (out / name / "report.md").exists()
        assert {r["system"] for r in _records(out / name)} == {
            "tiermem",
            "naive-rag",
            "bm25",
            "hybrid",
            "full-context",
        }
    rows = result["rows"]
    assert [(r.dataset, r.budget) for r in rows] == [
        (name, budget) for name in ("locomo_fx", "lme_fx", "lme_fx-bursty") for budget in (25, 1000)
    ]
    for row in rows:
        curve = result["runs"][row.dataset]["summary"]["curve"]
        for system in ("tiermem", "naive-rag", "bm25", "hybrid"):
            point = curve[system][row.budget]["overall"]
            assert row.recall[system] == point["recall"]
            assert row.tokens[system] == point["context_tokens"]
        assert row.lead == pytest.approx(
            row.recall["tiermem"]
            - max(row.recall["naive-rag"], row.recall["bm25"], row.recall["hybrid"])
        )
        assert row.retrieval_p50_s["tiermem"] is not None
    summary = (out / "summary.md").read_text()
    assert summary.count("| lme_fx-bursty |") == 2
    assert "tiermem lead (points)" in summary
    saved = json.loads((out / "summary.json").read_text())
    assert len(saved["rows"]) == 6
    assert saved["quirks"]["lme_fx"]["empty messages (skipped)"] == 2


def test_empty_messages_are_a_quirk_and_the_run_finishes(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    _, lme = files
    cfg = RunConfig(data=lme, out=tmp_path / "lme", k=2, embedder=HASH)
    results = run(cfg, Console(quiet=True))
    assert results["quirks"]["empty messages (skipped)"] == 2
    assert len(_records(cfg.out)) == 5 * 4  # every system, every question
    delivered = {t for r in _records(cfg.out) for t in r["delivered"]}
    assert not delivered & {"D1:9", "D2:9"}
    assert "| empty messages (skipped) | 2 |" in (cfg.out / "report.md").read_text()


def test_reports_group_by_question_type_where_the_file_has_one(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    locomo, lme = files
    configs = dataset_configs(_base(tmp_path), [locomo, lme])
    result = run_all(configs, tmp_path / "out", Console(quiet=True))
    by_type = result["runs"]["lme_fx"]["summary"]
    assert by_type["groups"] == ["knowledge-update", "multi-session", "single-session-user"]
    assert by_type["by_group"]["bm25"]["single-session-user"]["questions"] == 2
    for budget in (25, 1000):
        point = by_type["curve"]["tiermem"][budget]["groups"]["knowledge-update"]
        assert point["questions"] == 1
        assert point["context_tokens"] <= budget
    by_category = result["runs"]["locomo_fx"]["summary"]
    assert by_category["groups"] == ["multi-hop", "single-hop"]  # adversarial is apart
    report = (tmp_path / "out" / "lme_fx" / "report.md").read_text()
    assert "| system | budget | knowledge-update | multi-session | single-session-user |" in report


def test_a_bursty_run_asks_for_every_part_of_the_evidence(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    locomo, _ = files
    long_turn = json.loads(locomo.read_text())
    long_turn[0]["conversation"]["session_1"][0]["text"] = "I adopted a cat. Her name is Tofu."
    locomo.write_text(json.dumps(long_turn))
    cfg = RunConfig(data=locomo, out=tmp_path / "b", k=2, embedder=HASH, bursty=True)
    results = run(cfg, Console(quiet=True))
    cat = next(r for r in _records(cfg.out) if r["system"] == "full-context" and r["index"] == 0)
    assert cat["evidence"] == ["D1:1.1", "D1:1.2"]
    assert cat["recall"] == 1.0
    assert {"D1:1.1", "D1:1.2"} <= set(cat["delivered"])
    assert results["quirks"]["bursty: turns split into sentences"] == 1
    assert "bursty variant" in (cfg.out / "report.md").read_text()


def test_the_split_picks_conversations_by_position(tmp_path: Path) -> None:
    samples = []
    for i in range(9):
        sample = json.loads(json.dumps(FIXTURE[0]))
        sample["sample_id"] = f"fx-{i}"
        samples.append(sample)
    data = tmp_path / "nine.json"
    data.write_text(json.dumps(samples))
    seen = {}
    for split in ("choose", "report"):
        cfg = RunConfig(data, tmp_path / split, systems=("bm25",), k=2, split=split)
        results = run(cfg, Console(quiet=True))
        seen[split] = {r["sample"] for r in _records(cfg.out)}
        assert results["config"]["split"] == split
        assert f"split: {split}" in (cfg.out / "report.md").read_text()
    assert seen == {"choose": {f"fx-{i}" for i in range(7)}, "report": {"fx-7", "fx-8"}}


def test_resume_works_per_file(files: tuple[Path, Path], tmp_path: Path) -> None:
    locomo, lme = files
    base = _base(tmp_path, systems=("bm25",))
    run_all(dataset_configs(base, [locomo, lme]), base.out, Console(quiet=True))
    complete = {n: _records(base.out / n) for n in ("locomo_fx", "lme_fx")}
    cut = base.out / "lme_fx" / "records.jsonl"
    cut.write_text("\n".join(cut.read_text().splitlines()[:3]) + "\n")
    base.resume = True
    run_all(dataset_configs(base, [locomo, lme]), base.out, Console(quiet=True))
    assert _records(base.out / "locomo_fx") == complete["locomo_fx"]  # nothing left to do
    resumed = _records(base.out / "lme_fx")
    assert resumed[:3] == complete["lme_fx"][:3]  # what was done is kept, not redone
    key = lambda r: (r["index"], r["budget"])  # noqa: E731
    assert sorted(map(key, resumed)) == sorted(map(key, complete["lme_fx"]))
    assert len((base.out / "lme_fx" / "builds.jsonl").read_text().splitlines()) == 1


def test_the_command_line_takes_several_files_and_refuses_none(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tiermem.cli import main

    assert main(["bench", "locomo", "--out", str(tmp_path / "o")]) == 2
    assert "no data set: give --data FILE or --bursty FILE" in capsys.readouterr().out
    locomo, _ = files
    twice = ["bench", "locomo", "--data", str(locomo), "--data", str(locomo)]
    assert main([*twice, "--out", str(tmp_path / "o")]) == 2
    assert "two data sets would write to the same folder: locomo_fx" in capsys.readouterr().out
    out = str(tmp_path / "o")
    missing = ["--data", str(locomo), "--bursty", str(tmp_path / "none.json")]
    assert main(["bench", "locomo", *missing, "--out", out]) == 2
    assert "no data file at" in capsys.readouterr().out
    assert not (tmp_path / "o" / "locomo_fx").exists()  # refused before the first run
    bad = tmp_path / "bad.json"
    bad.write_text("[{}]")
    assert main(["bench", "locomo", "--data", str(locomo), "--data", str(bad), "--out", out]) == 2
    assert "is not a LoCoMo-format JSON file" in capsys.readouterr().out
    assert not (tmp_path / "o" / "locomo_fx").exists()


def test_one_data_set_alone_writes_into_out_itself(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    """As ``--data FILE`` always has: a run in progress resumes where it was."""
    locomo, _ = files
    (cfg,) = dataset_configs(_base(tmp_path), [locomo])
    assert cfg.out == tmp_path / "out"
    (bursty,) = dataset_configs(_base(tmp_path), [], [locomo])
    assert (bursty.out, bursty.bursty, bursty.name) == (tmp_path / "out", True, "locomo_fx-bursty")
