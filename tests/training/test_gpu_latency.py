"""``deploy/gpu_latency.py``, the LoRA selector's latency on a GPU, run on this CPU with the
tiny base: the real prompts are tokenised as served, a question's whole pool is timed in one
batch, and a random model of a config stands in where the weights cannot be had."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import pytest
from tiermem.config import EmbedderConfig
from tiermem.training.batches import prompt_text
from tiermem.training.dataset import DatasetConfig, read_examples, write_dataset

from tests.training.test_dataset import _conversation

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
                      embedder=EmbedderConfig(kind="hash")),
        selector,
    )  # fmt: skip
    prompts = root / "prompts.json"
    assert script["main"](
        ["prepare", "--selector", str(selector), "--tokenizer", str(tiny_base["base"]),
         "--out", str(prompts)]
    ) == 0  # fmt: skip
    made = json.loads(prompts.read_text())
    assert {len(group) for group in made["selector"]} == {4}  # the pool: 2k candidates
    tokenizer = tiny_base["tokenizer"]
    first = read_examples(selector)[0]
    served = tokenizer(prompt_text(tokenizer, first), add_special_tokens=False)["input_ids"]
    assert made["selector"][0][0] == list(served)  # the prompt as served
    capsys.readouterr()
    assert script["main"](
        ["time", "--prompts", str(prompts), "--base", f"config:{tiny_base['base']}",
         "--dtype", "float32", "--warmup", "1"]
    ) == 0  # fmt: skip
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["role"] for r in rows] == ["selector"]
    assert rows[0]["candidates"] == 4
    assert rows[0]["calls"] == len(made["selector"])
    assert all(r["made"] == "random weights, same config" and r["p50_s"] > 0 for r in rows)
