"""The LoRA pointwise selector's latency on a GPU, through transformers and peft.

A deployment check, in two steps. ``prepare`` (where tiermem is installed) turns the selector's
held-out dataset (``tiermem train dataset --negatives all``, so each question keeps its whole
pool) into ``prompts.json``: the token ids of each prompt as served (the base's chat template,
the assistant turn opened). ``time`` (torch, transformers and peft only, so it runs on a bare
GPU machine) times them on one or more bases. A base is a Hugging Face folder with weights, or,
where the weights cannot be had (an offline GPU box), ``config:FILE``: the architecture alone,
randomly initialised. Latency depends on the shapes and the token counts, not on the weights'
values, so a random model of the same config times the same; only what it would answer differs.
Each base gets a LoRA as the selector serves it (rank 8 on q/k/v/o, unmerged, as llama.cpp
applies an adapter).

Measured per base, after warm-up, with the GPU synchronised around each call: one question's
candidates (the read path's pool, 20 for k = 10) scored in one padded batch: the next-token
logits at each prompt's last token (P(yes) is read there), the shared prompt not cached
(llama.cpp on a CPU evaluates it once).

Output: one JSON line per base with p50 / p95 / mean seconds per question, and tokens.

    python deploy/gpu_latency.py prepare --selector sel.jsonl --tokenizer HF_DIR \
        --out prompts.json
    python deploy/gpu_latency.py time --prompts prompts.json --base HF_DIR
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def load_base(spec: str, device: str, dtype: torch.dtype) -> tuple[Any, str]:
    """A causal LM with the LoRA the selector serves, and how it was made."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    if spec.startswith("config:"):
        config = AutoConfig.from_pretrained(spec.removeprefix("config:"))
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
        made = "random weights, same config"
    else:
        model = AutoModelForCausalLM.from_pretrained(spec, dtype=dtype)
        made = "weights"
    lora = LoraConfig(
        r=8,
        lora_alpha=16,
        lora_dropout=0.0,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
    )
    model = get_peft_model(model, lora).to(device).eval()
    return model, made


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_selector(model: Any, groups: list[list[list[int]]], device: str, pad: int) -> list[float]:
    """Seconds per question: its candidates' prompts in one right-padded batch."""
    out = []
    for group in groups:
        width = max(len(p) for p in group)
        ids = torch.full((len(group), width), pad, dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        for row, prompt in enumerate(group):
            ids[row, : len(prompt)] = torch.tensor(prompt)
            mask[row, : len(prompt)] = 1
        last = torch.tensor([len(p) - 1 for p in group])
        _sync(device)
        started = time.perf_counter()
        with torch.inference_mode():
            ids, mask = ids.to(device), mask.to(device)
            inner = model.get_base_model()  # the head on each prompt's last token only
            hidden = inner.model(input_ids=ids, attention_mask=mask).last_hidden_state
            picked = inner.lm_head(hidden[torch.arange(len(group), device=device), last.to(device)])
            picked.float().softmax(-1).max(-1).values.cpu()
        _sync(device)
        out.append(time.perf_counter() - started)
    return out


def _row(base: str, made: str, role: str, seconds: list[float], **extra: Any) -> dict[str, Any]:
    return {
        "base": base,
        "made": made,
        "role": role,
        "calls": len(seconds),
        "p50_s": _percentile(seconds, 50),
        "p95_s": _percentile(seconds, 95),
        "mean_s": statistics.fmean(seconds),
        **extra,
    }


def prepare(args: argparse.Namespace) -> dict[str, Any]:
    """The dataset's prompts as token ids: selector pools grouped by question."""
    from tiermem.training.batches import prompt_text
    from tiermem.training.dataset import read_examples
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)

    def ids(example: Any) -> list[int]:
        return list(
            tokenizer(prompt_text(tokenizer, example), add_special_tokens=False)["input_ids"]
        )

    pools: dict[tuple[str, int], list[list[int]]] = {}
    for example in read_examples(Path(args.selector)):
        pools.setdefault((example.meta.sample_id, example.meta.question_index), []).append(
            ids(example)
        )
    out: dict[str, Any] = {
        "selector": [p for p in pools.values() if len(p) == max(map(len, pools.values()))]
    }
    Path(args.out).write_text(json.dumps(out))
    return out


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    prompts = json.loads(Path(args.prompts).read_text())
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[args.dtype]
    rows = []
    for base in args.base:
        model, made = load_base(base, device, dtype)
        groups = prompts["selector"][: args.questions]
        time_selector(model, groups[: args.warmup], device, 0)  # warm-up: kernels, allocator
        seconds = time_selector(model, groups, device, 0)
        tokens = statistics.fmean(sum(len(p) for p in g) for g in groups)
        rows.append(_row(base, made, "selector", seconds, candidates=len(groups[0]),
                         prompt_tokens_per_query=tokens, device=device))  # fmt: skip
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    prep = steps.add_parser("prepare", help="a dataset -> prompts.json (needs tiermem)")
    prep.add_argument("--selector", required=True, help="tiermem train dataset, --negatives all")
    prep.add_argument("--tokenizer", required=True, help="the base's HF folder (its tokenizer)")
    prep.add_argument("--out", required=True)
    timing = steps.add_parser("time", help="time prompts.json on bases (torch, peft)")
    timing.add_argument("--prompts", required=True, help="prompts.json")
    timing.add_argument("--base", action="append", required=True, help="HF folder or config:FILE")
    timing.add_argument("--device", help="default: cuda if any, else cpu")
    timing.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    timing.add_argument("--questions", type=int, default=40, help="selector questions timed")
    timing.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    if args.step == "prepare":
        made = prepare(args)
        print(json.dumps({role: len(items) for role, items in made.items()}))
        return 0
    for row in run(args):
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
