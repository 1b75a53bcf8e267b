"""``deploy/gpu_latency.py``, the roles' latency on a GPU, run on this CPU with the tiny base:
the real prompts are tokenised as served, a selector question's whole pool is timed in one
batch, generation decodes as many tokens as the gold answer holds, and a random model of a
config stands in where the weights cannot be had."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import pytest
from tiermem.config import EmbedderConfig
from tiermem.training.dataset import DatasetConfig, write_dataset
from tiermem.training.generation import encode_answer
from tiermem.training.roles import read_role_examples, write_role_dataset

from tests.training.test_dataset import _conversation
from tests.training.test_writer import observed

pytestmark = pytest.mark.slow  # loads a model

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "gpu_latency.py"


@pytest.fixture(scope="module")
def script() -> dict[str, Any]:
    return runpy.run_path(str(SCRIPT))


def test_prompts_are_timed_as_served(
    tiny_base: dict[str, Any], script: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    root = tiny_base["root"]
    data = root / "ten.json"
    data.write_text(json.dumps([_conversation(i) for i in range(10)]))
    selector = root / "sel.jsonl"
    write_dataset(
        DatasetConfig(data=data, split="test", k=2, negatives=None,
                      embedder=EmbedderConfig(provider="hash")),
        selector,
    )  # fmt: skip
    roles = root / "roles.json"
    roles.write_text(json.dumps(observed(10)))
    for role in ("writer", "controller"):
        write_role_dataset(role, [roles], "test", root / f"{role}.jsonl")
    prompts = root / "prompts.json"
    assert script["main"](
        ["prepare", "--selector", str(selector), "--writer", str(root / "writer.jsonl"),
         "--controller", str(root / "controller.jsonl"), "--tokenizer", str(tiny_base["base"]),
         "--out", str(prompts)]
    ) == 0  # fmt: skip
    made = json.loads(prompts.read_text())
    assert {len(group) for group in made["selector"]} == {4}  # the pool: 2k candidates
    example = read_role_examples(root / "writer.jsonl")[0]
    ids, labels = encode_answer(tiny_base["tokenizer"], example)
    first = made["writer"][0]
    assert first["prompt"] + first["answer"] == ids  # the prompt as served, then the answer
    assert first["answer_tokens"] == sum(1 for t in labels if t != -100)
    capsys.readouterr()
    assert script["main"](
        ["time", "--prompts", str(prompts), "--base", f"config:{tiny_base['base']}",
         "--dtype", "float32", "--calls", "1", "--decode", "3", "--warmup", "1",
         "--train-steps", "1"]
    ) == 0  # fmt: skip
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["role"] for r in rows] == [
        "selector",
        "writer",
        "controller",
        "train-writer",
        "train-controller",
    ]
    assert rows[0]["candidates"] == 4
    assert rows[0]["calls"] == len(made["selector"])
    assert rows[1]["decoded_tokens"] == 3  # capped by --decode
    assert all(r["made"] == "random weights, same config" and r["p50_s"] > 0 for r in rows)
