"""``tiermem bench selector``, ``writer`` and ``generator``: a role's variants compared on
held-out data. They need training's evaluation, so they are registered on the bench suites'
subparsers from here (``add_bench_parser`` builds those). Only argparse and paths are imported
at module level: the CLI's parser is built on every ``tiermem`` call.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from tiermem.bench.cli import parse_budgets, parse_names, positive
from tiermem.slm.roles.cross_encoder import PRECISIONS
from tiermem.training.cli import parse_count

# the bench suites that need training's evaluation
ROLE_BENCHES = ("selector", "writer", "generator")


def add_role_bench_parsers(suites: Any) -> None:
    """``tiermem bench selector`` and ``tiermem bench writer`` on the bench suites'
    subparsers (``add_bench_parser``): a role's variants compared on held-out data."""
    sel = suites.add_parser(
        "selector", help="rank fusion, listwise, pointwise and LoRA-tuned selectors, one run"
    )
    _role_bench_arguments(sel, "rows, summary", "pointwise-lora")
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
    wr = suites.add_parser(
        "writer", help="the writer's facts against LoCoMo's gold observations, base and LoRA"
    )
    _role_bench_arguments(wr, "writer.json", "the lora variant")
    wr.add_argument(
        "--split", default="tune,test", help="comma-separated: train, tune, test (7-9: tune,test)"
    )
    wr.add_argument("--windows", default="30", help="a seeded sample of the windows, or 'all'")
    wr.add_argument("--seed", type=int, default=0)
    wr.add_argument("--variants", default="base,lora", help="lora runs with --adapter")
    wr.add_argument(
        "--updates",
        type=int,
        default=4,
        help="bench updates' users whose changes score the supersedes (0: none)",
    )

    gen = suites.add_parser(
        "generator", help="answer()'s model generator, base and LoRA, on held-out questions"
    )
    _role_bench_arguments(gen, "answers.jsonl, generator.json", "the lora variant")
    gen.add_argument(
        "--split", default="test", help="by position %% 10: train (0-6), tune (7) or test (8-9)"
    )
    gen.add_argument("--questions", help="a seeded sample per conversation, or 'all' (default)")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument(
        "--embedder", choices=("sentence-transformers", "hash"), default="sentence-transformers"
    )
    gen.add_argument("--embed-cache", type=Path, metavar="DIR", help="memoise embeddings here")


def _role_bench_arguments(bench: Any, out: str, adapted: str) -> None:
    """What a role's bench reads and writes: a data file, a folder, a base and its LoRA."""
    bench.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    bench.add_argument("--out", type=Path, required=True, help=out)
    bench.add_argument("--model", default="qwen0.5b", help="the base model (llama.cpp alias/GGUF)")
    bench.add_argument("--adapter", type=Path, help=f"a GGUF LoRA on --model ({adapted})")


def _inputs(args: argparse.Namespace) -> dict[str, Any]:
    """What every role bench reads and writes (``_role_bench_arguments``)."""
    return {"data": args.data, "out": args.out, "model": args.model, "adapter": args.adapter}


def run_role_bench(args: argparse.Namespace, console: Console) -> None:
    """``tiermem bench selector``, ``writer`` or ``generator``: a role's variants on the
    same inputs."""
    if args.suite == "generator":
        from tiermem.config import EmbedderConfig
        from tiermem.training.generator_eval import GeneratorEvalConfig
        from tiermem.training.generator_eval import run as evaluate_generator

        evaluate_generator(
            GeneratorEvalConfig(
                **_inputs(args),
                split=args.split,
                questions=parse_count(args.questions, "--questions", None),
                seed=args.seed,
                embedder=EmbedderConfig(provider=args.embedder),
                embed_cache=args.embed_cache,
            ),
            console,
        )
        return
    if args.suite == "writer":
        from tiermem.training.writer_eval import WriterEvalConfig
        from tiermem.training.writer_eval import run as evaluate_writer

        variants = parse_names(args.variants, "--variants") or ()
        if args.adapter is None:
            variants = tuple(v for v in variants if v != "lora")
        evaluate_writer(
            WriterEvalConfig(
                **_inputs(args),
                splits=parse_names(args.split, "--split") or (),
                windows=parse_count(args.windows, "--windows", None),
                seed=args.seed,
                variants=variants,
                updates=max(0, args.updates),
            ),
            console,
        )
        return
    from tiermem.training.evaluate import SelectorEvalConfig
    from tiermem.training.evaluate import run as evaluate_selectors

    evaluate_selectors(
        SelectorEvalConfig(
            **_inputs(args),
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
