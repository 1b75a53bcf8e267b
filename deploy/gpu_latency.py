"""The online roles' latency on a GPU, through transformers and peft: a deployment check.

Two steps. ``prepare`` (where tiermem is installed) turns the roles' held-out datasets
(``tiermem train dataset``: the selector's with ``--negatives all``, so each question keeps its
whole pool; the writer's; the controller's) into ``prompts.json``: the token ids of each
prompt as served (the base's chat template, the assistant turn opened) and of each gold
answer. ``time`` (torch, transformers and peft only, so it runs on a bare GPU machine) times
them on one or more bases. A base is a Hugging Face folder with
weights, or, where the weights cannot be had (an offline GPU box), ``config:FILE``: the
architecture alone, randomly initialised. Latency depends on the shapes and the token
counts, not on the weights' values, so a random model of the same config times the same;
only what it would answer differs. Each base gets a LoRA as the roles serve it (rank 8 on
q/k/v/o, unmerged, as llama.cpp applies an adapter).

Measured per base, after warm-up, with the GPU synchronised around each call:

- ``selector``: one question's candidates (the read path's pool, 20 for k = 10) scored in one
  padded batch: the next-token logits at each prompt's last token (P(yes) is read there),
  the shared prompt not cached (llama.cpp on a CPU evaluates it once).
- ``writer`` and ``controller``: one prompt, prefill then greedy decoding of as many tokens
  as that role's gold answer holds (``--decode`` caps it), end of sequence ignored, so a random
  model decodes as long as a trained one would.

With ``--train-steps N``, also N LoRA training steps per generating role (``train-writer``,
``train-controller``: seconds per step of one example), the cost of training on that base.

Output: one JSON line per (base, role) with p50 / p95 / mean seconds per call, and tokens.

    python deploy/gpu_latency.py prepare --selector sel.jsonl --writer wr.jsonl \
        --controller ctl.jsonl --tokenizer HF_DIR --out prompts.json
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
    """A causal LM with the LoRA the roles serve, and how it was made."""
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


def time_generation(
    model: Any, prompts: list[list[int]], decode: list[int], device: str
) -> list[float]:
    """Seconds per call: prefill, then ``decode[i]`` greedy tokens (EOS ignored)."""
    out = []
    for prompt, steps in zip(prompts, decode, strict=True):
        ids = torch.tensor([prompt], device=device)
        _sync(device)
        started = time.perf_counter()
        with torch.inference_mode():
            model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=steps,
                min_new_tokens=steps,
                do_sample=False,
                pad_token_id=0,
            )
        _sync(device)
        out.append(time.perf_counter() - started)
    return out


def time_training(model: Any, items: list[dict[str, Any]], steps: int, device: str) -> list[float]:
    """Seconds per LoRA step (one example, AdamW), the loss on the answer's tokens only, as
    ``tiermem train writer`` and ``controller`` train."""
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    for p in trainable:
        p.data = p.data.float()  # the adapter in float32 over a bfloat16 base, as training does
    optimiser = torch.optim.AdamW(trainable, lr=1e-4)
    out = []
    for step in range(steps):
        item = items[step % len(items)]
        ids = torch.tensor([item["prompt"] + item["answer"]], device=device)
        labels = torch.tensor([[-100] * len(item["prompt"]) + item["answer"]], device=device)
        _sync(device)
        started = time.perf_counter()
        with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimiser.step()
        optimiser.zero_grad(set_to_none=True)
        _sync(device)
        out.append(time.perf_counter() - started)
    model.eval()
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
    """The datasets' prompts as token ids: selector pools grouped by question."""
    from tiermem.training.batches import prompt_text
    from tiermem.training.dataset import read_examples
    from tiermem.training.generation import encode_answer
    from tiermem.training.roles import read_role_examples
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
    for role in ("writer", "controller"):
        items = []
        for example in read_role_examples(Path(getattr(args, role)))[: args.limit]:
            whole, labels = encode_answer(tokenizer, example)
            answer = sum(1 for t in labels if t != -100)
            items.append(
                {"prompt": whole[: len(whole) - answer], "answer": whole[len(whole) - answer :],
                 "answer_tokens": answer}
            )  # fmt: skip
        out[role] = items
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
        gen = {role: prompts[role][: args.calls] for role in ("writer", "controller")}
        time_selector(model, groups[: args.warmup], device, 0)  # warm-up: kernels, allocator
        seconds = time_selector(model, groups, device, 0)
        tokens = statistics.fmean(sum(len(p) for p in g) for g in groups)
        rows.append(_row(base, made, "selector", seconds, candidates=len(groups[0]),
                         prompt_tokens_per_query=tokens, device=device))  # fmt: skip
        for role, items in gen.items():
            ids = [x["prompt"] for x in items]
            decode = [min(args.decode, x["answer_tokens"]) for x in items]
            time_generation(model, ids[: args.warmup], decode[: args.warmup], device)
            seconds = time_generation(model, ids, decode, device)
            rows.append(_row(base, made, role, seconds, device=device,
                             prompt_tokens=statistics.fmean(len(p) for p in ids),
                             decoded_tokens=statistics.fmean(decode)))  # fmt: skip
        for role, items in gen.items():
            if args.train_steps:
                seconds = time_training(model, items, args.train_steps + args.warmup, device)
                rows.append(_row(base, made, f"train-{role}", seconds[args.warmup :],
                                 device=device))  # fmt: skip
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    prep = steps.add_parser("prepare", help="datasets -> prompts.json (needs tiermem)")
    prep.add_argument("--selector", required=True, help="tiermem train dataset, --negatives all")
    prep.add_argument("--writer", required=True, help="tiermem train dataset --role writer")
    prep.add_argument("--controller", required=True, help="... --role controller")
    prep.add_argument("--tokenizer", required=True, help="the base's HF folder (its tokenizer)")
    prep.add_argument("--limit", type=int, default=40, help="writer / controller prompts kept")
    prep.add_argument("--out", required=True)
    timing = steps.add_parser("time", help="time prompts.json on bases (torch, peft)")
    timing.add_argument("--prompts", required=True, help="prompts.json")
    timing.add_argument("--base", action="append", required=True, help="HF folder or config:FILE")
    timing.add_argument("--device", help="default: cuda if any, else cpu")
    timing.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    timing.add_argument("--questions", type=int, default=40, help="selector questions timed")
    timing.add_argument("--calls", type=int, default=20, help="writer / controller calls timed")
    timing.add_argument("--decode", type=int, default=256, help="most tokens decoded a call")
    timing.add_argument("--warmup", type=int, default=3)
    timing.add_argument("--train-steps", type=int, default=0, help="LoRA steps timed per role")
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
