"""``tiermem bench selector``: the selectors compared on held-out data. It needs training's
evaluation, so it is registered on the bench suites' subparsers from here
(``add_bench_parser`` builds those). Only argparse and paths are imported at module level: the
CLI's parser is built on every ``tiermem`` call.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from tiermem.bench.cli import parse_budgets, parse_names, positive
from tiermem.slm.roles.cross_encoder import PRECISIONS

# the bench suites that need training's evaluation
ROLE_BENCHES = ("selector",)


def add_role_bench_parsers(suites: Any) -> None:
    """``tiermem bench selector`` on the bench suites' subparsers (``add_bench_parser``): the
    selector's variants compared on held-out data."""
    sel = suites.add_parser(
        "selector", help="rank fusion, listwise, pointwise and LoRA-tuned selectors, one run"
    )
    sel.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    sel.add_argument("--out", type=Path, required=True, help="rows, summary")
    sel.add_argument("--model", default="qwen0.5b", help="the base model (llama.cpp alias/GGUF)")
    sel.add_argument("--adapter", type=Path, help="a GGUF LoRA on --model (pointwise-lora)")
    sel.add_argument(
        "--split", default="test", help="by position %% 10: train (0-6), tune (7) or test (8-9)"
    )
    sel.add_argument("-k", type=int, default=10, help="kept at most; the pool is 2k")
    sel.add_argument("--questions", type=int, help="per conversation, evenly spaced (default: all)")
    sel.add_argument("--budget", default="300,600,1200", help="token budgets of the context")
    sel.add_argument(
        "--calibrate-questions",
        type=int,
        default=0,
        help="tune-split questions to calibrate the pointwise threshold on (0: keep k)",
    )
    sel.add_argument("--weight", type=float, default=0.3, help="the model's share of the score")
    sel.add_argument(
        "--variants",
        default="fusion,listwise,pointwise,pointwise-lora,cross-encoder",
        help="pointwise-lora runs with --adapter, cross-encoder with --cross-encoder",
    )
    sel.add_argument(
        "--cross-encoder", type=Path, metavar="DIR", help="from train selector --arch cross-encoder"
    )
    sel.add_argument(
        "--cross-encoder-precision",
        choices=PRECISIONS,
        default="auto",
        help="auto: bfloat16 on a CPU that computes it in hardware, float32 elsewhere",
    )
    sel.add_argument("--embed-cache", type=Path, metavar="DIR", help="memoise embeddings here")
    sel.add_argument(
        "--bursty",
        action="store_true",
        help="run --data's bursty variant (every sentence its own message), as bench locomo does",
    )


def run_role_bench(args: argparse.Namespace, console: Console) -> None:
    """``tiermem bench selector``: the selector's variants on the same inputs."""
    from tiermem.training.evaluate import SelectorEvalConfig
    from tiermem.training.evaluate import run as evaluate_selectors

    evaluate_selectors(
        SelectorEvalConfig(
            data=args.data,
            out=args.out,
            model=args.model,
            adapter=args.adapter,
            split=args.split,
            k=positive(args.k, "-k"),
            questions=args.questions and positive(args.questions, "--questions"),
            budgets=parse_budgets(args.budget) or (),
            calibrate_questions=max(0, args.calibrate_questions),
            weight=args.weight,
            variants=parse_names(args.variants, "--variants") or (),
            cross_encoder=args.cross_encoder,
            cross_encoder_precision=args.cross_encoder_precision,
            embed_cache=args.embed_cache,
            bursty=args.bursty,
        ),
        console,
    )


__all__ = ["ROLE_BENCHES", "add_role_bench_parsers", "run_role_bench"]
