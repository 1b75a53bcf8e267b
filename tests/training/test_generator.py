"""The answer generator's training set and its LoRA: each example is the prompt the served
generator sends for that question (what ``answer()`` hands it), the target the data set's
answer where the context holds the evidence, a refusal for never-mentioned facts (and for
adversarial questions where asked), the new and the old value for a changed fact; and a
tiny model trained, exported to a GGUF LoRA and served through llama.cpp, which it changes
as it changes peft."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from tiermem.bench.datasets import load_dataset
from tiermem.bench.systems import Tiermem
from tiermem.bench.update_answers import answer_sample, print_answers
from tiermem.bench.update_scenarios import scenarios
from tiermem.bench.updates import absent_questions
from tiermem.cli import main
from tiermem.config import BackendConfig, EmbedderConfig, GeneratorConfig, TiermemConfig
from tiermem.embedding import build_embedder
from tiermem.errors import SLMTimeout
from tiermem.generator import NOTHING_IN_MEMORY
from tiermem.slm.prompts import generator
from tiermem.training.generation import train_role
from tiermem.training.generator_data import (
    GENERATOR_FAMILIES,
    GeneratorDataConfig,
    scenario_questions,
    write_generator_dataset,
)
from tiermem.training.generator_eval import GeneratorEvalConfig
from tiermem.training.generator_eval import run as run_generator_bench
from tiermem.training.lora import TrainConfig
from tiermem.training.roles import read_role_examples
from tiermem.training.writer_data import UPDATE_FIRST_USER, UPDATE_SEED

from tests.fakes.scripted import KIND, ScriptedModels
from tests.training.test_controller import (
    assert_served_as_trained,
    conversations,
    train_through_the_cli,
)
from tests.training.test_lora import SETTINGS

pytestmark = pytest.mark.slow  # trains a model

HASH = GeneratorDataConfig(EmbedderConfig(provider="hash"), update_users=2)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "fx.json"
    path.write_text(json.dumps(conversations()))
    return path


def _answers(path: Path) -> dict[str, str]:
    return {
        e.messages[-1].content.rsplit("Question: ", 1)[-1]: json.loads(e.target)["answer"]
        for e in read_role_examples(path)
    }


def test_targets_are_the_gold_answer_or_a_refusal(data: Path, tmp_path: Path) -> None:
    stats = write_generator_dataset([data], "train", tmp_path / "train.jsonl", HASH)
    assert stats.conversations == 7
    answers = _answers(tmp_path / "train.jsonl")
    assert answers["What is the name of Ana's cat (number 0)?"] == "Tofu"
    assert answers["Which instrument does Ben play in the orchestra (number 3)?"] == "oboe"
    # adversarial: it asks about what was never said (Ben has no dog); not taught by default
    assert "What is Ben's dog called (number 0)?" not in answers
    assert stats.adversarial_left_out >= 7
    assert not any("number 7" in q for q in answers)  # the tune conversation stays out
    assert stats.update_examples > 0
    examples = read_role_examples(tmp_path / "train.jsonl")
    assert {e.meta.role for e in examples} == {"generator"}
    assert {e.meta.prompt_version for e in examples} == {generator.VERSION}
    tune = write_generator_dataset([data], "tune", tmp_path / "tune.jsonl", HASH)
    assert (tune.conversations, tune.update_examples) == (1, 0)  # scenarios: train only


def test_adversarial_refusals_are_taught_when_asked(data: Path, tmp_path: Path) -> None:
    asked = replace(HASH, adversarial_refusals=True)
    stats = write_generator_dataset([data], "train", tmp_path / "train.jsonl", asked)
    answers = _answers(tmp_path / "train.jsonl")
    assert answers["What is Ben's dog called (number 0)?"] == NOTHING_IN_MEMORY
    assert stats.adversarial_left_out == 0
    assert stats.refusals >= 7


def test_an_example_is_the_prompt_the_served_generator_sends(
    data: Path, tmp_path: Path, scripted_models: ScriptedModels
) -> None:
    """Ingested and asked as a user would, with the model generator on a scripted backend:
    its request holds the example's messages, word for word."""
    write_generator_dataset([data], "train", tmp_path / "train.jsonl", HASH)
    example = next(
        e
        for e in read_role_examples(tmp_path / "train.jsonl")
        if e.meta.sample_id == "fx-2" and json.loads(e.target)["answer"] == "Lisbon"
    )
    backend = scripted_models.serve("gen", {"answer": "x"})
    config = TiermemConfig(
        embedder=EmbedderConfig(provider="hash"),
        generator=GeneratorConfig(kind="model", backend=BackendConfig(kind=KIND, model="gen")),
    )
    samples, _ = load_dataset(data)
    system = Tiermem(config, tmp_path / "served", 10)
    try:
        system.build(samples[2])
        assert system.memory is not None
        question = example.messages[-1].content.rsplit("Question: ", 1)[-1]
        assert system.memory.answer(question, "fx-2").text == "x"
    finally:
        system.close()
    assert tuple(backend.requests[-1].messages) == example.messages
    assert "My sister bakes bread in Lisbon (number 2)." in example.messages[-1].content


def test_a_changed_fact_teaches_the_new_value_then_the_old() -> None:
    scenario = scenarios(UPDATE_SEED, 3, UPDATE_FIRST_USER)[0]
    taught = scenario_questions(scenario)
    families = {f.turn_id: f.family for f in scenario.facts}
    for q, answer in taught:
        assert {families.get(t, "") for t in q.evidence} <= {*GENERATOR_FAMILIES, "correction"}
        if q.group == "before":
            assert answer == q.answer
    changed = [(q, a) for q, a in taught if q.group == "update" and "; it was " in a]
    never = [(q, a) for q, a in taught if q.group == "absent"]
    assert changed  # this user has a trained family changed (two, with seed 1001)
    for q, answer in changed:
        old = next(b.answer for b, _ in taught if b.evidence == q.evidence[:1])
        assert answer == f"{q.answer}; it was {old} before."
    assert all(not q.evidence for q, _ in never)


@pytest.fixture(scope="module")
def trained(tiny_base: dict[str, Any]) -> dict[str, Any]:
    root = tiny_base["root"]
    path = root / "gen-fx.json"
    path.write_text(json.dumps(conversations()))
    full = root / "generator-all.jsonl"
    write_generator_dataset([path], "train", full, replace(HASH, update_users=1))
    dataset = root / "generator.jsonl"
    four = [e for e in read_role_examples(full) if e.meta.sample_id.startswith("fx-")][:4]
    dataset.write_text("".join(e.to_json() + "\n" for e in four))
    settings = replace(SETTINGS, epochs=2, batch_size=2, learning_rate=5e-2)
    config = TrainConfig(dataset, str(tiny_base["base"]), root / "gen", settings)
    return {**tiny_base, "dataset": dataset, "run": train_role("generator", config)}


def test_the_gguf_lora_changes_llamacpp_as_it_changes_peft(trained: dict[str, Any]) -> None:
    assert len(trained["run"].losses) == 4
    assert_served_as_trained(trained, "generator")


def test_the_cli_trains_and_exports_the_generator(
    trained: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out = train_through_the_cli(trained, "generator", capsys)
    assert json.loads((out / "train.json").read_text())["prompt_version"] == generator.VERSION
    assert "The generator" in (out / "Modelfile").read_text()


def test_the_cli_builds_the_generators_dataset(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tune.jsonl"
    code = main(["train", "dataset", "--role", "generator", "--data", str(data), "--split",
                 "tune", "--out", str(out), "--embedder", "hash"])  # fmt: skip
    assert code == 0, capsys.readouterr().out
    printed = capsys.readouterr().out
    assert "generator examples (0 from update scenarios" in printed
    assert "adversarial left out" in printed
    assert {e.meta.sample_id for e in read_role_examples(out)} == {"fx-7"}


def _question(request: Any) -> str:
    return request.messages[-1].content.rsplit("Question: ", 1)[-1].strip()


def test_bench_generator_scores_answers_and_refusals(
    data: Path, tmp_path: Path, scripted_models: ScriptedModels
) -> None:
    """Through answer(), on the same memories: a generator that answers the gold scores F1
    100 and refuses none; one that always refuses scores the adversarial questions only."""
    samples, _ = load_dataset(data)
    gold = {q.question: q.answer for s in samples for q in s.questions}
    right = scripted_models.serve("right", lambda r: {"answer": gold[_question(r)]})
    scripted_models.serve("refuse", {"answer": NOTHING_IN_MEMORY})
    variants = {
        name: GeneratorConfig(kind="model", backend=BackendConfig(kind=KIND, model=name))
        for name in ("right", "refuse")
    }
    cfg = GeneratorEvalConfig(
        data, tmp_path / "out", split="tune", embedder=EmbedderConfig(provider="hash")
    )
    summary = run_generator_bench(cfg, Console(width=140), variants)
    answerable, adversarial = "all answerable", "all adversarial"
    assert summary["right"][answerable]["n"] == 4  # fx-7's four questions with evidence
    assert summary["right"][answerable]["gold_in"] == 100.0
    assert summary["right"][answerable]["refused"] == 0.0
    assert summary["refuse"][answerable]["refused"] == 100.0
    assert summary["refuse"][adversarial]["f1"] == 100.0  # an abstention, as LoCoMo scores it
    assert summary["right"][adversarial]["f1"] == 0.0  # it named Tofu for Ben's dog
    assert len(right.requests) == 5
    rows = (tmp_path / "out" / "answers.jsonl").read_text().splitlines()
    assert len(rows) == 10


def test_bench_updates_counts_new_stale_and_refused_answers(
    tmp_path: Path, scripted_models: ScriptedModels
) -> None:
    """A generator that answers every changed fact with its old value is stale wherever it
    was asked, one that answers the new value never is."""
    conv = scenarios(7, 1)[0].conversation
    before = {q.evidence: q.answer for q in conv.questions if q.group == "before"}
    # a corrected plan has no earlier value asked about: that generator refuses it
    old = {q.question: before[q.evidence[:1]] for q in conv.questions if q.evidence[:1] in before}
    new = {q.question: q.answer for q in conv.questions}
    scripted_models.serve("old", lambda r: {"answer": old.get(_question(r), NOTHING_IN_MEMORY)})
    scripted_models.serve("new", lambda r: {"answer": new.get(_question(r), NOTHING_IN_MEMORY)})
    generators = {
        name: GeneratorConfig(kind="model", backend=BackendConfig(kind=KIND, model=name))
        for name in ("old", "new")
    }
    absent = [absent_questions(conv)]
    assert absent[0]
    base = TiermemConfig(embedder=EmbedderConfig(provider="hash"))
    embedder = build_embedder(base.embedder)
    tallies = answer_sample([conv], absent, base, generators, tmp_path, embedder)
    stale, fresh = tallies["old"].row(), tallies["new"].row()
    assert stale["stale"] > 0
    assert stale["new"] == 0.0
    assert fresh["stale"] == 0.0
    assert fresh["new"] > 50.0
    assert fresh["refused"] == stale["refused"] == 100.0
    families = [k for k in fresh if k.startswith("new/") and not k.endswith("_asked")]
    assert sum(fresh[f"{k}_asked"] for k in families) == fresh["new_asked"]
    console = Console(width=160, record=True)
    print_answers({"old": stale, "new": fresh}, 1, console)
    shown = console.export_text()
    assert "new: the new value, by family: " in shown
    assert f"{fresh['stale']:.1f}" in shown


def test_an_answer_that_fell_back_is_a_miss_not_the_new_value(
    tmp_path: Path, scripted_models: ScriptedModels
) -> None:
    """A failed call falls back to the extractive answer, which quotes the whole context
    (old and new values): counted as fallen back, never as the new value."""
    conv = scenarios(7, 1)[0].conversation
    scripted_models.serve("down", SLMTimeout("generator", "no answer within 1 s"))
    down = GeneratorConfig(kind="model", backend=BackendConfig(kind=KIND, model="down"))
    base = TiermemConfig(embedder=EmbedderConfig(provider="hash"))
    embedder = build_embedder(base.embedder)
    row = answer_sample([conv], [[]], base, {"down": down}, tmp_path, embedder)["down"].row()
    assert row["fell_back"] > 50.0
    assert row["new"] == row["stale"] == 0.0
