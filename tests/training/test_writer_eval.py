"""``tiermem bench writer``: the served writer's facts scored against the gold observations of
held-out windows, with copies, invalid outputs and unnamed speakers counted apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from tiermem.bench.update_scenarios import scenarios
from tiermem.cli import main
from tiermem.config import EmbedderConfig
from tiermem.slm.base import SLMRequest
from tiermem.training import TrainingInputError
from tiermem.training.writer_data import update_windows
from tiermem.training.writer_eval import WriterEvalConfig, run

from tests.fakes.scripted import ScriptedModels
from tests.training.test_writer import observed


def _writes(request: SLMRequest) -> str:
    """Session 1: two of the gold facts and two copies of turns; session 2: a fact the gold
    does not hold, naming nobody; conversation 8's: a turn not shown, conversation 9's: no
    JSON (each thrown away whole by the write path)."""
    prompt = request.messages[-1].content
    turns = prompt.split("Turns:\n")[1]
    number = turns.split("(number ")[1].split(")")[0]
    entry = {"kind": "fact", "date": "", "replaces": 0}
    if "adopted a cat" in turns:
        return json.dumps({"entries": [
            {**entry, "text": f"Ana adopted a cat named Tofu (number {number}).", "turns": [1]},
            {**entry, "text": f"Ben plays the oboe in an orchestra (number {number}).",
             "turns": [2]},
            {**entry, "text": f"I adopted a cat called Tofu (number {number}).", "turns": [1]},
            {**entry, "text": f"Ana: My sister bakes bread in Lisbon (number {number}).",
             "turns": [2]},  # a labelled copy, under a wrong citation: dropped as served
        ]})  # fmt: skip
    if number == "8":
        return json.dumps({"entries": [{**entry, "text": "Ben has a dog.", "turns": [5]}]})
    if number == "9":
        return "not json"
    return json.dumps({"entries": [{**entry, "text": "Someone likes jazz a lot.", "turns": [1]}]})


def _config(tmp_path: Path, **overrides: object) -> WriterEvalConfig:
    data = tmp_path / "ten.json"
    data.write_text(json.dumps(observed(10)))
    settings: dict[str, object] = {
        "data": data,
        "out": tmp_path / "out",
        "model": "writer",
        "backend_kind": "scripted",
        "windows": None,
        "variants": ("base",),
        "embedder": EmbedderConfig(provider="hash"),
        "updates": 0,
        **overrides,
    }
    return WriterEvalConfig(**settings)  # type: ignore[arg-type]


def test_facts_are_scored_as_the_write_path_would_store_them(
    tmp_path: Path, scripted_models: ScriptedModels
) -> None:
    scripted_models.serve("writer", _writes)
    result = run(_config(tmp_path), Console(quiet=True))
    assert result["windows"] == 6  # conversations 7-9, a window a session
    row = result["variants"]["base"]
    # gold: 3 + 1 facts in each of 3 conversations; kept: 2 + 1, 2 (turn 5 of 2), 2 (no JSON)
    assert row["written"] == 7
    assert row["copies"] == 6
    assert row["invalid"] == 2
    assert row["precision"] == pytest.approx(100 * 6 / 7)
    assert row["recall"] == pytest.approx(100 * 6 / 12)
    assert row["speaker"] == pytest.approx(100 * 6 / 7)  # "Someone" names no speaker
    assert row["calls_per_kept_turn"] == pytest.approx(6 / 15)
    written = json.loads((tmp_path / "out" / "writer.json").read_text())["variants"]["base"]
    assert {k: v for k, v in written.items() if v == v} == {k: v for k, v in row.items() if v == v}
    assert row["changes"] == 0  # no update users asked for: no supersede scored


def test_supersedes_are_scored_on_the_benchmarks_own_changes(
    tmp_path: Path, scripted_models: ScriptedModels
) -> None:
    """A writer that writes each window's gold replaces right wherever the older statement is
    shown; one that replaces another memory shown is wrong every time."""
    made = [w for w in update_windows(scenarios(7, 2), "bench") if w.changes]
    gold = {w.example().messages[-1].content: w.example().target for w in made}

    def perfect(request: SLMRequest) -> str:
        return gold.get(request.messages[-1].content, '{"entries": []}')

    def off_by_one(request: SLMRequest) -> str:
        target = json.loads(perfect(request))
        for e in target["entries"]:
            e["replaces"] = e["replaces"] % 2 + 1 if e["replaces"] else 0
        return json.dumps(target)

    rows = {}
    for name, writes in (("perfect", perfect), ("wrong", off_by_one)):
        scripted_models.serve(name, writes)
        config = _config(tmp_path, model=name, updates=2, windows=0)  # the changes alone
        rows[name] = run(config, Console(quiet=True))["variants"]["base"]
    right = rows["perfect"]
    assert right["changes"] == 2 * 4  # a correction and three changes a user
    assert 0 < right["changes_shown"] < right["changes"]  # a correction is said in one add()
    assert right["supersede_precision"] == 100
    assert right["supersede_recall"] == pytest.approx(100 * right["changes_shown"] / 8)
    assert rows["wrong"]["supersedes"] > 0
    assert rows["wrong"]["supersede_precision"] == 0


def test_the_same_windows_are_sampled_for_every_run(
    tmp_path: Path, scripted_models: ScriptedModels
) -> None:
    backend = scripted_models.serve("writer", _writes)
    run(_config(tmp_path, windows=3, seed=1), Console(quiet=True))
    first = [r.messages[-1].content for r in backend.requests]
    backend.requests.clear()
    run(_config(tmp_path, windows=3, seed=1), Console(quiet=True))
    assert len(set(first)) == 3
    assert [r.messages[-1].content for r in backend.requests if r.task == "writer"][:3] == first[:3]


def test_bad_arguments_are_typed_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(TrainingInputError, match="adapter"):
        run(_config(tmp_path, variants=("base", "lora")), Console(quiet=True))
    with pytest.raises(TrainingInputError, match="split"):
        run(_config(tmp_path, splits=("report",)), Console(quiet=True))
    code = main(["bench", "writer", "--data", str(tmp_path / "ten.json"), "--out",
                 str(tmp_path / "o"), "--split", "nine"])  # fmt: skip
    assert code == 2
    assert "--split takes" in capsys.readouterr().out
