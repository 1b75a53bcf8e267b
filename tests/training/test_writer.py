"""The writer's training set and its LoRA: windows of turns rendered as the write path serves
them, the gold observations in each as its entries, update examples that supersede the older
statement, and a tiny model trained, exported to a GGUF LoRA and served through llama.cpp,
which it changes as it changes peft."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tiermem.bench.update_scenarios import FAMILIES, scenarios
from tiermem.bench.updates import UpdatesConfig
from tiermem.cli import main
from tiermem.slm.prompts import writer
from tiermem.training import TrainingInputError
from tiermem.training.generation import IGNORED, encode_answer, train_role
from tiermem.training.lora import TrainConfig
from tiermem.training.roles import read_role_examples, write_role_dataset
from tiermem.training.settings import CONTROLLER_MAX_EXAMPLES, WRITER_MAX_EXAMPLES
from tiermem.training.writer_data import (
    UPDATE_FIRST_USER,
    UPDATE_SEED,
    WRITER_FAMILIES,
    update_examples,
)

from tests.training.test_controller import (
    assert_served_as_trained,
    conversations,
    train_through_the_cli,
)
from tests.training.test_lora import SETTINGS

pytestmark = pytest.mark.slow  # trains a model


def observed(count: int = 8) -> list[dict[str, Any]]:
    """The controller's fixture conversations with LoCoMo's ``observation`` facts."""
    out = conversations(count)
    for i, sample in enumerate(out):
        sample["observation"] = {
            "session_1_observation": {
                "Ana": [
                    [f"Ana adopted a cat named Tofu (number {i}).", "D1:1"],
                    [f"I adopted a cat called Tofu (number {i}).", "D1:1"],  # a copy: left out
                    [f"Ana's sister bakes bread in Lisbon (number {i}).", "D1:3"],
                ],
                "Ben": [[f"Ben plays the oboe in an orchestra (number {i}).", "D1:2"]],
            },
            "session_2_observation": {
                "Ana": [[f"Ana's cat Tofu had his second birthday (number {i}).", "D2:2"]]
            },
        }
    return out


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "fx.json"
    path.write_text(json.dumps(observed()))
    return path


def test_a_window_is_served_turns_and_its_gold_observations_are_the_entries(
    data: Path, tmp_path: Path
) -> None:
    stats = write_role_dataset("writer", [data], "train", tmp_path / "train.jsonl")
    examples = read_role_examples(tmp_path / "train.jsonl")
    windows = [e for e in examples if e.meta.category == "observations"]
    assert (stats.conversations, len(windows)) == (7, 7 * 2)  # one window a session
    assert stats.update_examples == len(examples) - len(windows) > 0
    first = windows[0]
    turns = [
        "3 June 2024 · Ana: I adopted a cat called Tofu (number 0).",
        "3 June 2024 · Ben: I play the oboe in an orchestra (number 0).",
        "3 June 2024 · Ana: My sister bakes bread in Lisbon (number 0).",
    ]
    assert first.messages == tuple(writer.build_messages(writer.WriterInput(turns, [], [])))
    entries = json.loads(first.target)["entries"]
    assert [(e["text"], e["turns"], e["replaces"]) for e in entries] == [
        ("Ana adopted a cat named Tofu (number 0).", [1], 0),
        ("Ben plays the oboe in an orchestra (number 0).", [2], 0),
        ("Ana's sister bakes bread in Lisbon (number 0).", [3], 0),
    ]
    shown = windows[1].messages[-1].content.split("Existing memories:\n")[1].split("\n\n")[0]
    # the next session is shown, as the store would find them, the earlier turns and facts
    # with the most words in common (Tofu, orchestra), five at most
    assert len(shown.splitlines()) == 5
    assert "] [3 June 2024] Ana: I adopted a cat called Tofu (number 0)." in shown
    assert "] [3 June 2024] Ana adopted a cat named Tofu (number 0)." in shown  # as written
    assert "Lisbon" in shown.splitlines()[-1]  # it shares only "number" and "0"
    assert "I adopted a cat called Tofu" not in windows[0].target  # a copy is never taught
    assert json.loads(windows[1].target)["entries"][0]["turns"] == [2]
    tune = write_role_dataset("writer", [data], "tune", tmp_path / "tune.jsonl")
    assert (tune.conversations, tune.examples, tune.update_examples) == (1, 2, 0)


def test_a_file_without_observations_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(conversations()))
    with pytest.raises(TrainingInputError, match=r"no writer example.*observation"):
        write_role_dataset("writer", [path], "train", tmp_path / "train.jsonl")
    assert not (tmp_path / "train.jsonl").exists()


def test_updates_are_windows_of_other_users_that_replace_what_they_are_shown() -> None:
    made = scenarios(UPDATE_SEED, 6, UPDATE_FIRST_USER)
    examples = update_examples(made, "train")
    bench = scenarios(UpdatesConfig(out=Path("x")).seed, 24)
    users = {s.conversation.speaker_a for s in made}
    assert not users & {s.conversation.speaker_a for s in bench}  # never the benchmark's users
    facts = {(s.conversation.sample_id, f.turn_id): f for s in made for f in s.facts}
    said = {
        (s.conversation.sample_id, t.turn_id): t.text
        for s in made
        for session in s.conversation.sessions
        for t in session.turns
    }
    for e in examples:  # no window holds a statement of an unseen family, target or not
        in_window = [facts.get((e.meta.sample_id, t)) for t in e.meta.evidence]
        assert all(f.family in WRITER_FAMILIES for f in in_window if f is not None)
    taught = [(e, entry) for e in examples for entry in json.loads(e.target)["entries"]]
    superseding = set()
    for e, entry in taught:
        number = entry["turns"][0]
        key = (e.meta.sample_id, e.meta.evidence[number - 1])  # the turn it cites, in its window
        fact = facts[key]
        assert entry["text"] == fact.text
        assert fact.family in WRITER_FAMILIES  # the benchmark's other families stay unseen
        if not entry["replaces"]:
            continue
        assert fact.replaces is not None  # only a change replaces
        superseding.add(fact.family)
        shown = e.messages[-1].content.split("Existing memories:\n")[1].split("\n\n")[0]
        line = shown.splitlines()[entry["replaces"] - 1]
        old = (e.meta.sample_id, fact.replaces)
        # what it replaces is the older statement's turn, or the fact written of it
        assert line.endswith((f": {said[old]}", f"] {facts[old].text}")), (line, fact)
    assert superseding  # some changes are taught as supersedes
    assert {entry["turns"][0] for _, entry in taught} != {1}  # cited where they stand
    assert set(WRITER_FAMILIES) < {f.name for f in FAMILIES}  # some families unseen
    assert "correction" not in WRITER_FAMILIES


def test_the_generating_roles_sample_fewer_examples_by_default_than_the_selector() -> None:
    """A writer's or controller's example is a whole prompt run forward and backward; the
    selector's default sample would keep either over the hour on a 2-core CPU."""
    from tiermem.cli import _parser
    from tiermem.training.cli import _settings

    def sample(*argv: str) -> int | None:
        return _settings(_parser().parse_args(["train", *argv, "--dataset", "d"])).max_examples

    assert sample("writer") == WRITER_MAX_EXAMPLES < sample("selector")
    assert sample("controller") == CONTROLLER_MAX_EXAMPLES < sample("selector")
    assert sample("writer", "--max-examples", "all") is None
    assert sample("controller", "--max-examples", "all") is None


def _examples(tiny_base: dict[str, Any]) -> list[Any]:
    path = tiny_base["root"] / "wx.json"
    path.write_text(json.dumps(observed()))
    dataset = tiny_base["root"] / "writer.jsonl"
    write_role_dataset("writer", [path], "train", dataset)
    examples = read_role_examples(dataset)
    return [examples[0], examples[1], examples[-2], examples[-1]]  # windows and updates


@pytest.fixture(scope="module")
def trained(tiny_base: dict[str, Any]) -> dict[str, Any]:
    examples = _examples(tiny_base)
    dataset = tiny_base["root"] / "four-writer.jsonl"
    dataset.write_text("".join(e.to_json() + "\n" for e in examples))
    settings = replace(SETTINGS, epochs=20, batch_size=2, learning_rate=5e-2)
    config = TrainConfig(dataset, str(tiny_base["base"]), tiny_base["root"] / "wr", settings)
    return {**tiny_base, "dataset": dataset, "run": train_role("writer", config)}


def test_the_entries_are_learned_and_the_window_is_masked(tiny_base: dict[str, Any]) -> None:
    for example in _examples(tiny_base):
        ids, labels = encode_answer(tiny_base["tokenizer"], example)
        answered = tiny_base["tokenizer"].decode([t for t in labels if t != IGNORED])
        assert answered.startswith(example.target)
        assert answered.endswith("<|im_end|>")
        assert len(ids) == len(labels) < 1024  # the tiny model's context


def test_training_lowers_the_writers_loss(trained: dict[str, Any]) -> None:
    losses = trained["run"].losses
    assert len(losses) == 40
    assert np.mean(losses[-4:]) < np.mean(losses[:2]) - 0.2


def test_the_gguf_lora_changes_llamacpp_as_it_changes_peft(trained: dict[str, Any]) -> None:
    assert_served_as_trained(trained, "writer")


def test_the_cli_builds_the_dataset_trains_and_exports(
    trained: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out = train_through_the_cli(trained, "writer", capsys)
    served = (out / "Modelfile").read_text()
    assert served.startswith("# The writer:")
    assert "num_predict" not in served  # a writer's answer is more than one token
    assert json.loads((out / "train.json").read_text())["prompt_version"] == writer.VERSION
    root = trained["root"]
    code = main(["train", "dataset", "--role", "writer", "--data", str(root / "wx.json"),
                 "--out", str(root / "wtrain.jsonl")])  # fmt: skip
    assert code == 0
    assert "update scenarios) from 7 conversations" in capsys.readouterr().out
    code = main(["train", "writer", "--dataset", str(root / "missing.jsonl")])
    assert code == 2
    assert "does not exist" in capsys.readouterr().out
