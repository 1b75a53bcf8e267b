"""The controller's training set and its LoRA: targets from the gold evidence, splits by
position, held-out text kept out of training, and a tiny model trained, exported to a GGUF
LoRA and served through llama.cpp, which it changes as it changes peft."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tiermem.cli import main
from tiermem.slm.prompts import controller
from tiermem.training.export import hf_to_gguf, lora_to_gguf
from tiermem.training.generation import IGNORED, encode_answer, train_role
from tiermem.training.lora import TrainConfig
from tiermem.training.roles import read_role_examples, write_role_dataset

from tests.engine.test_bench_locomo import FIXTURE
from tests.training.test_lora import SETTINGS, _llamacpp

pytestmark = pytest.mark.slow  # trains a model


def conversations(count: int = 8) -> list[dict[str, Any]]:
    """``count`` copies of the fixture, each with its own id and its own words."""
    out = []
    for i in range(count):
        sample = copy.deepcopy(FIXTURE[0])
        sample["sample_id"] = f"fx-{i}"
        for turn in [*sample["conversation"]["session_1"], *sample["conversation"]["session_2"]]:
            turn["text"] = f"{turn['text'][:-1]} (number {i})."
        for question in sample["qa"]:
            question["question"] = f"{question['question'][:-1]} (number {i})?"
        out.append(sample)
    return out


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "fx.json"
    samples = conversations()
    samples[0]["qa"].append(
        {"question": "What did Ana adopt in June 2024?", "answer": "a cat", "evidence": ["D1:1"],
         "category": 4}
    )  # fmt: skip
    path.write_text(json.dumps(samples))
    return path


def test_targets_are_the_evidence_as_memories_in_the_controllers_schema(
    data: Path, tmp_path: Path
) -> None:
    stats = write_role_dataset("controller", [data], "train", tmp_path / "train.jsonl")
    examples = read_role_examples(tmp_path / "train.jsonl")
    assert (stats.conversations, stats.examples) == (7, 7 * 4 + 1)  # 0-6, adversarial skipped
    first = examples[0]
    assert first.messages == tuple(
        controller.build_messages(
            controller.ControllerInput("What is the name of Ana's cat (number 0)?", (), first_day())
        )
    )
    target = controller.ControllerOutput.model_validate_json(first.target)
    assert [(q.text, q.route, q.weight) for q in target.queries] == [
        ("Ana: I adopted a cat called Tofu (number 0).", "mtm", 3)
    ]
    dated = next(e for e in examples if "June 2024" in e.messages[-1].content)
    assert json.loads(dated.target)["since"] == "2024-06-01"
    assert json.loads(dated.target)["until"] == "2024-06-30"
    tune = write_role_dataset("controller", [data], "tune", tmp_path / "tune.jsonl")
    assert tune.conversations == 1
    assert {e.meta.sample_id for e in read_role_examples(tmp_path / "tune.jsonl")} == {"fx-7"}


def first_day() -> Any:
    from datetime import date

    return date(2024, 6, 20)  # the conversation's last session: "today" when asked


def test_a_training_example_holding_held_out_text_is_dropped(tmp_path: Path) -> None:
    samples = conversations()
    held_out = samples[7]["conversation"]["session_1"][0]["text"]
    samples[2]["conversation"]["session_1"][0]["text"] = held_out  # a shared distractor turn
    path = tmp_path / "leaky.json"
    path.write_text(json.dumps(samples))
    stats = write_role_dataset("controller", [path], "train", tmp_path / "train.jsonl")
    assert stats.leaks_dropped == 1
    texts = [e.target for e in read_role_examples(tmp_path / "train.jsonl")]
    assert not any(held_out.split(" (")[0] in t and "number 7" in t for t in texts)


def test_the_answer_is_learned_and_the_prompt_is_masked(tiny_base: dict[str, Any]) -> None:
    example = _examples(tiny_base)[0]
    ids, labels = encode_answer(tiny_base["tokenizer"], example)
    answered = [t for t in labels if t != IGNORED]
    decoded = tiny_base["tokenizer"].decode(answered)
    assert decoded.startswith(example.target)
    assert decoded.endswith("<|im_end|>")  # it learns to stop where serving stops
    assert ids[: len(ids) - len(answered)] == [
        *tiny_base["tokenizer"](_prompt(tiny_base, example), add_special_tokens=False)["input_ids"]
    ]


def _prompt(tiny_base: dict[str, Any], example: Any) -> str:
    from tiermem.training.batches import prompt_text

    return prompt_text(tiny_base["tokenizer"], example)


def _examples(tiny_base: dict[str, Any]) -> list[Any]:
    path = tiny_base["root"] / "fx.json"
    path.write_text(json.dumps(conversations()))
    dataset = tiny_base["root"] / "controller.jsonl"
    write_role_dataset("controller", [path], "train", dataset)
    return read_role_examples(dataset)[:4]


@pytest.fixture(scope="module")
def trained(tiny_base: dict[str, Any]) -> dict[str, Any]:
    examples = _examples(tiny_base)
    dataset = tiny_base["root"] / "four.jsonl"
    dataset.write_text("".join(e.to_json() + "\n" for e in examples))
    settings = replace(SETTINGS, epochs=20, batch_size=2, learning_rate=5e-2)
    config = TrainConfig(dataset, str(tiny_base["base"]), tiny_base["root"] / "ctl", settings)
    return {**tiny_base, "dataset": dataset, "run": train_role("controller", config)}


def test_training_lowers_the_answer_loss(trained: dict[str, Any]) -> None:
    losses = trained["run"].losses
    assert len(losses) == 40
    # a random 64-wide model with tied embeddings cannot put much mass on any token (its
    # floor is near 10.4 nats here): the loss falls, and the real run shows how far
    assert np.mean(losses[-4:]) < np.mean(losses[:2]) - 0.2


def test_the_gguf_lora_changes_llamacpp_as_it_changes_peft(trained: dict[str, Any]) -> None:
    assert_served_as_trained(trained, "controller")


def assert_served_as_trained(trained: dict[str, Any], role: str) -> None:
    """The first example's prompt goes to llama.cpp token for token as trained, and the GGUF
    LoRA moves llama.cpp's logits as the adapter moves peft's."""
    run, root, tokenizer = trained["run"], trained["root"], trained["tokenizer"]
    base_gguf = hf_to_gguf(trained["base"], root / f"{role}-base.gguf", "f32")
    adapter = lora_to_gguf(run.adapter, trained["base"], root / f"{role}.gguf", "f32")
    example = read_role_examples(trained["dataset"])[0]
    plain, tuned = _llamacpp(base_gguf, None, example), _llamacpp(base_gguf, adapter, example)
    prompt = tokenizer(_prompt(trained, example), add_special_tokens=False)["input_ids"]
    assert plain["tokens"] == prompt  # served token for token as trained
    with torch.no_grad():
        ids = torch.tensor([prompt])
        peft_tuned = run.model(input_ids=ids).logits[0, -1].numpy()
        with run.model.disable_adapter():
            peft_plain = run.model(input_ids=ids).logits[0, -1].numpy()
    assert np.abs(np.array(plain["logits"]) - peft_plain).max() < 1e-3
    assert np.abs(np.array(tuned["logits"]) - peft_tuned).max() < 1e-3
    assert np.abs(np.array(tuned["logits"]) - np.array(plain["logits"])).max() > 0.1


def test_the_cli_builds_the_dataset_trains_and_exports(
    trained: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out = train_through_the_cli(trained, "controller", capsys)
    assert json.loads((out / "train.json").read_text())["prompt_version"] == controller.VERSION
    root = trained["root"]
    code = main(["train", "dataset", "--role", "controller", "--data", str(root / "fx.json"),
                 "--split", "test", "--out", str(root / "test.jsonl")])  # fmt: skip
    assert code == 2  # positions 8-9: the 8 conversations have none
    assert "no controller example in the test split" in capsys.readouterr().out


def train_through_the_cli(
    trained: dict[str, Any], role: str, capsys: pytest.CaptureFixture[str]
) -> Path:
    """``tiermem train ROLE`` on the four examples: the adapter, its GGUF and a Modelfile."""
    out = trained["root"] / f"{role}-cli"
    code = main(
        ["train", role, "--dataset", str(trained["dataset"]), "--base",
         str(trained["base"]), "--out", str(out), "--rank", "2", "--batch-size", "4",
         "--max-examples", "all", "--precision", "float32", "--checkpoint-every", "1"]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().out
    assert (out / "adapter.gguf").read_bytes()[:4] == b"GGUF"
    assert f"ADAPTER {out / 'adapter.gguf'}" in (out / "Modelfile").read_text()
    assert "1 steps on 4 examples" in capsys.readouterr().out
    return out


def test_the_loss_is_the_whole_sequences_loss_over_the_answer(tiny_base: dict[str, Any]) -> None:
    """The head runs on the answer's positions only; the loss is what the full logits give."""
    from tiermem.training.generation import answer_tokens, batch_loss
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_base["base"])
    rows = [encode_answer(tiny_base["tokenizer"], e) for e in _examples(tiny_base)[:3]]
    width = max(len(ids) for ids, _ in rows)
    ids = torch.zeros((3, width), dtype=torch.long)
    labels = torch.full((3, width), IGNORED)
    mask = torch.zeros((3, width), dtype=torch.long)
    for row, (tokens, targets) in enumerate(rows):
        ids[row, : len(tokens)], labels[row, : len(targets)] = (
            torch.tensor(tokens),
            torch.tensor(targets),
        )
        mask[row, : len(tokens)] = 1
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits
        whole = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
            ignore_index=IGNORED,
        )  # fmt: skip
        # over the batch's own mean answer length: the mean per answer token
        mean = sum(map(answer_tokens, rows)) / len(rows)
        assert float(batch_loss(model, rows, 0, "cpu", mean)) == pytest.approx(
            float(whole), abs=1e-4
        )


def test_in_training_every_answer_token_weighs_the_same_whatever_its_answers_length(
    tiny_base: dict[str, Any],
) -> None:
    """With the run's mean answer length given, a row's loss is its summed cross-entropy over
    that length: a short answer's tokens weigh no more than a long one's (with the row's own
    mean they weigh ``mean length / own length`` times more)."""
    from tiermem.training.generation import answer_tokens, batch_loss
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_base["base"])
    rows = [encode_answer(tiny_base["tokenizer"], e) for e in _examples(tiny_base)]
    lengths = [answer_tokens(row) for row in rows]
    assert min(lengths) < max(lengths)
    short, long = rows[lengths.index(min(lengths))], rows[lengths.index(max(lengths))]
    mean = sum(lengths) / len(lengths)
    with torch.no_grad():
        for row in (short, long):
            own_mean = float(batch_loss(model, [row], 0, "cpu", answer_tokens(row)))
            weighed = float(batch_loss(model, [row], 0, "cpu", mean))
            assert weighed == pytest.approx(own_mean * answer_tokens(row) / mean, rel=1e-4)
        both = float(batch_loss(model, [short, long], 0, "cpu", mean))
        alone = [float(batch_loss(model, [row], 0, "cpu", mean)) for row in (short, long)]
        assert both == pytest.approx(sum(alone) / 2, rel=1e-4)
