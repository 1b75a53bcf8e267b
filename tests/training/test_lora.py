"""LoRA on a tiny, randomly initialised Llama (2 layers, hidden 64, SmolLM2's tokenizer taken
out of its GGUF, so nothing is downloaded): it trains, reloads through peft with identical
logits, resumes from a checkpoint to the same adapter, and, exported to a GGUF LoRA beside the
base converted to GGUF, changes llama.cpp's output exactly as it changes peft's.

llama.cpp runs in a child process: a build that dies on an instruction fails this test only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tiermem.cli import main
from tiermem.slm.prompts import relevance
from tiermem.training import TrainingInputError
from tiermem.training.batches import answer_logits, encode, encode_group, group_logits
from tiermem.training.dataset import Example, ExampleMeta
from tiermem.training.export import OLLAMA_BASE, hf_to_gguf, lora_to_gguf, modelfile
from tiermem.training.lora import (
    LoraSettings,
    TrainConfig,
    TrainResult,
    load_adapter,
    train_selector,
)

pytestmark = pytest.mark.slow  # trains a model

PAIRS = [
    ("Where did Ann move?", "[1 May 2024] Ann: We moved to Oslo in spring.", True),
    ("Where did Ann move?", "[1 May 2024] Ben: I like green tea.", False),
    ("What pet does Ben have?", "[2 May 2024] Ben: My dog Rex turned two.", True),
    ("What pet does Ben have?", "[2 May 2024] Ann: Oslo is cold in March.", False),
]
SETTINGS = LoraSettings(
    rank=4, alpha=8, dropout=0.0, learning_rate=1e-2, epochs=4, batch_size=1,
    max_examples=None, checkpoint_every=2, precision="float32",
)  # fmt: skip

CHILD = """
import json, sys
from llama_cpp import Llama
from tiermem.slm.base import ChatMessage, ScoreRequest
from tiermem.slm.llamacpp import LlamaCppBackend, chat_tokens, evaluate_reusing_prefix, last_logits
from pathlib import Path
model, lora, messages = sys.argv[1], sys.argv[2] or None, json.loads(sys.argv[3])
llm = Llama(model_path=model, lora_path=lora, n_ctx=1024, verbose=False)
tokens = chat_tokens(llm, messages)
evaluate_reusing_prefix(llm, tokens)
logits = [float(x) for x in last_logits(llm)]
backend = LlamaCppBackend(Path(model), n_ctx=1024, lora_path=Path(lora) if lora else None)
chat = [ChatMessage(m["role"], m["content"]) for m in messages]
scores = backend.score_next_token(ScoreRequest("relevance", chat))
print(json.dumps({"tokens": tokens, "logits": logits, "yes": scores.logprobs["yes"]}))
"""


def _examples() -> list[Example]:
    out = []
    for i, (question, memory, label) in enumerate(PAIRS):
        messages = relevance.build_messages(relevance.RelevanceInput(question, memory))
        meta = ExampleMeta(
            "train", "fx", 0, i // 2, 4, f"m{i}", i % 2, 2, label, (), (), relevance.VERSION
        )
        out.append(Example(tuple(messages), relevance.target(label), meta))
    return out


@pytest.fixture(scope="module")
def tiny(tiny_base: dict[str, Any]) -> dict[str, Any]:
    """The tiny base folder, its tokenizer, a dataset file and one training run on it."""
    root, base = tiny_base["root"], tiny_base["base"]
    dataset = root / "train.jsonl"
    dataset.write_text("".join(e.to_json() + "\n" for e in _examples()))
    result = train_selector(TrainConfig(dataset, str(base), root / "run", SETTINGS))
    return {**tiny_base, "dataset": dataset, "run": result}


def _logits(model: Any, tokenizer: Any, example: Example) -> torch.Tensor:
    with torch.no_grad():
        return answer_logits(model, tokenizer, [example])[0]


def test_training_lowers_the_answer_loss_and_reloads_with_identical_logits(
    tiny: dict[str, Any],
) -> None:
    run: TrainResult = tiny["run"]
    assert run.steps == 8
    assert len(run.losses) == 8
    assert sum(run.losses[-2:]) < sum(run.losses[:2])
    assert (run.adapter / "adapter_model.safetensors").is_file()
    summary = json.loads((run.out / "train.json").read_text())
    assert summary["prompt_version"] == relevance.VERSION
    assert summary["steps"] == 8
    reloaded, tokenizer = load_adapter(run.adapter)
    example = _examples()[0]
    tuned = _logits(run.model, tokenizer, example)
    assert torch.equal(_logits(reloaded, tokenizer, example), tuned)
    with run.model.disable_adapter():
        untuned = _logits(run.model, tokenizer, example)
    assert not torch.allclose(untuned, tuned, atol=1e-3)


def test_a_questions_candidates_on_their_shared_prefix_score_as_each_alone(
    tiny: dict[str, Any],
) -> None:
    run: TrainResult = tiny["run"]
    tokenizer, pair = tiny["tokenizer"], _examples()[:2]  # one question, two memories
    group = encode_group(tokenizer, pair)
    assert len(group.prefix) > 100  # the system text and the question, evaluated once
    with torch.no_grad():
        shared = group_logits(run.model, group, 0, "cpu")
        alone = answer_logits(run.model, tokenizer, pair)
    assert torch.allclose(shared, alone, atol=1e-4)


def test_bfloat16_holds_the_frozen_base_in_bfloat16_and_the_adapter_in_float32(
    tiny: dict[str, Any],
) -> None:
    settings = replace(SETTINGS, precision="bfloat16", epochs=1)
    out = tiny["root"] / "bf16"
    run = train_selector(TrainConfig(tiny["dataset"], str(tiny["base"]), out, settings))
    trained = {p.dtype for p in run.model.parameters() if p.requires_grad}
    frozen = {p.dtype for p in run.model.parameters() if not p.requires_grad}
    assert (trained, frozen) == ({torch.float32}, {torch.bfloat16})
    assert json.loads((out / "train.json").read_text())["precision"] == "bfloat16"


def test_resume_continues_from_the_checkpoint_to_the_same_adapter(tiny: dict[str, Any]) -> None:
    from safetensors.torch import load_file

    run: TrainResult = tiny["run"]
    again = tiny["root"] / "resumed"
    shutil.copytree(run.out / "checkpoints" / "step-000006", again / "checkpoints" / "step-000006")
    config = TrainConfig(tiny["dataset"], str(tiny["base"]), again, SETTINGS, resume=True)
    resumed = train_selector(config)
    assert resumed.resumed_from == 6
    assert resumed.losses[:6] == run.losses[:6]
    first = load_file(str(run.adapter / "adapter_model.safetensors"))
    second = load_file(str(resumed.adapter / "adapter_model.safetensors"))
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    other = replace(config, settings=replace(SETTINGS, rank=8))
    with pytest.raises(TrainingInputError, match="other settings"):
        train_selector(other)


def _llamacpp(model: Path, lora: Path | None, example: Example) -> dict[str, Any]:
    messages = json.dumps([{"role": m.role, "content": m.content} for m in example.messages])
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(model), str(lora or ""), messages],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_the_gguf_lora_changes_llamacpp_output_as_it_changes_peft(tiny: dict[str, Any]) -> None:
    run: TrainResult = tiny["run"]
    root, tokenizer = tiny["root"], tiny["tokenizer"]
    base_gguf = hf_to_gguf(tiny["base"], root / "base.gguf", "f32")
    adapter_gguf = lora_to_gguf(run.adapter, tiny["base"], root / "adapter.gguf", "f32")
    example = _examples()[0]
    plain = _llamacpp(base_gguf, None, example)
    tuned = _llamacpp(base_gguf, adapter_gguf, example)
    # what the selector serves is token for token what training rendered
    assert plain["tokens"] == encode(tokenizer, example).input_ids
    peft_tuned = _logits(run.model, tokenizer, example).numpy()
    with run.model.disable_adapter():
        peft_plain = _logits(run.model, tokenizer, example).numpy()
    assert np.abs(np.array(plain["logits"]) - peft_plain).max() < 1e-3
    assert np.abs(np.array(tuned["logits"]) - peft_tuned).max() < 1e-3
    assert np.abs(np.array(tuned["logits"]) - np.array(plain["logits"])).max() > 0.1
    assert tuned["yes"] != pytest.approx(plain["yes"], abs=1e-3)


def test_the_cli_trains_and_writes_the_gguf_lora_and_a_modelfile(
    tiny: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tiny["root"] / "cli"
    code = main(
        ["train", "selector", "--dataset", str(tiny["dataset"]), "--base", str(tiny["base"]),
         "--out", str(out), "--rank", "2", "--batch-size", "4", "--max-examples", "all",
         "--precision", "float32", "--checkpoint-every", "1"]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().out
    modelfile = (out / "Modelfile").read_text()
    assert f"ADAPTER {out / 'adapter.gguf'}" in modelfile
    assert "FROM llama3.2:1b-instruct-q4_K_M" in modelfile  # a Hugging Face base: the deploy one
    assert (out / "adapter.gguf").read_bytes()[:4] == b"GGUF"
    printed = capsys.readouterr().out
    assert "1 steps on 4 examples" in printed
    assert "step 1/1 mean loss" in printed  # a log file sees the progress


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rank", "0"], "rank must be >= 1"),
        (["--max-examples", "many"], "--max-examples takes a count or 'all'"),
        (["--target-modules", "no_such_proj"], "cannot put LoRA on this base"),
        (["--precision", "float8"], "precision is one of"),
    ],
)
def test_bad_arguments_are_one_line_errors(
    tiny: dict[str, Any], capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    base = ["train", "selector", "--dataset", str(tiny["dataset"]), "--base", str(tiny["base"])]
    code = main([*base, "--out", str(tiny["root"] / "bad"), "--no-export", *args])
    printed = capsys.readouterr().out.strip().splitlines()
    assert code == 2
    assert printed[-1].startswith("error: ")
    assert message in printed[-1]


def test_the_deploy_modelfile_is_the_one_the_export_writes() -> None:
    deploy = Path(__file__).resolve().parents[2] / "deploy" / "ollama" / "Modelfile.selector"
    assert deploy.read_text().endswith(modelfile(OLLAMA_BASE, "./adapter.gguf"))
