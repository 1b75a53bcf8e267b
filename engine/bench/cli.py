"""The ``tiermem bench`` commands: their parsers and how each runs. Imported by every CLI
run, so nothing heavy is imported before a suite runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from tiermem.bench import SYSTEMS
from tiermem.config import ONLINE_ROLES, TiermemConfig
from tiermem.errors import InvalidInputError


def add_bench_parser(commands: Any) -> Any:
    """``bench`` and its suites on the CLI's subcommands (an argparse subparsers action);
    returns the suites' subparsers, for suites that live elsewhere (``bench selector``, in
    ``tiermem.training.cli``: training builds on the benchmark, not the other way round)."""
    bench = commands.add_parser("bench", help="benchmarks, each beside a baseline")
    suites = bench.add_subparsers(dest="suite", required=True)
    mtm = suites.add_parser("mtm", help="add()/context() cost vs an exact in-memory store")
    mtm.add_argument("--sizes", default="1000,10000", help="entries per user, comma-separated")
    mtm.add_argument("--samples", type=int, default=200, help="timed calls per measurement")
    mtm.add_argument(
        "--embedder", choices=("sentence-transformers", "hash"), default="sentence-transformers"
    )
    mtm.add_argument("--users", type=int, default=1, help="users, each filled with a size")
    mtm.add_argument(
        "--stores",
        default="qdrant-embedded,qdrant-edge,qdrant-edge-graph,exact-reference",
        help="which stores, comma-separated: qdrant-embedded (qdrant-client's local mode), "
        "qdrant-edge (Qdrant Edge shards), qdrant-edge-graph (the shards after `tiermem "
        "optimize`), exact-reference (the baseline)",
    )
    mtm.add_argument("--out", type=Path, help="also write the results as JSON here")
    upd = suites.add_parser(
        "updates", help="changed facts: is the newest statement delivered (own scenarios)"
    )
    upd.add_argument("--out", type=Path, required=True, help="updates.json and the state")
    upd.add_argument("--budget", default="300,600,1200,2400", help="token ceilings")
    upd.add_argument("--users", type=int, default=24, help="scenarios, one user each")
    upd.add_argument("--seed", type=int, default=7)
    upd.add_argument("--model", help="also run the writer on this llama.cpp model")
    upd.add_argument(
        "--embedder", choices=("sentence-transformers", "hash"), default="sentence-transformers"
    )
    upd.add_argument("--config", type=Path, help="tiermem's configuration (TOML), as in locomo")
    loco = suites.add_parser(
        "locomo", help="tiermem beside naive-rag, bm25, hybrid (their RRF), full-context"
    )
    loco.add_argument(
        "--data",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a LoCoMo-format JSON file (repeatable: each is run, into OUT/<file stem>)",
    )
    loco.add_argument(
        "--bursty",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="also run FILE's bursty variant, every sentence its own message "
        "(repeatable, into OUT/<file stem>-bursty)",
    )
    loco.add_argument(
        "--out", type=Path, required=True, help="a folder per data set, and the summary"
    )
    loco.add_argument(
        "--split",
        choices=("choose", "report", "all"),
        default="all",
        help="by position %% 10: 0-6 (choose, training's train), 7-9 (report, training's "
        "tune and test), or all",
    )
    loco.add_argument(
        "--embed-cache",
        type=Path,
        metavar="DIR",
        help="memoise embeddings on disk here, for naive-rag and tiermem and later runs",
    )
    loco.add_argument(
        "--systems", default=",".join(SYSTEMS), help="comma-separated, of " + ", ".join(SYSTEMS)
    )
    loco.add_argument(
        "--conversations", help="0-based sample indices or sample ids, e.g. 0,1 or conv-30"
    )
    loco.add_argument("--max-questions", type=int, help="per conversation, in file order")
    loco.add_argument(
        "--sample",
        type=int,
        help="at most this many conversations of each file, evenly spaced in file order",
    )
    loco.add_argument("-k", type=int, default=10, help="memories / turns delivered")
    loco.add_argument(
        "--budget",
        help="token ceilings, e.g. 300,600,1200,2400: each system delivers the most it can "
        "within each (replaces -k)",
    )
    loco.add_argument(
        "--model", help="tiermem's SLM roles on this llama.cpp model (default: model-free roles)"
    )
    loco.add_argument(
        "--roles",
        default=",".join(ONLINE_ROLES),
        help="the roles --model plays (the others stay model-free), e.g. controller",
    )
    loco.add_argument("--generator", help="answer every system's questions with this model")
    loco.add_argument("--judge-url", help="OpenAI-compatible endpoint of an LLM judge")
    loco.add_argument("--judge-model", help="the judge's model name at that endpoint")
    loco.add_argument("--resume", action="store_true", help="continue an interrupted run")
    loco.add_argument(
        "--lodo",
        action="store_true",
        help="leave one data set out: each data set's figure from the settings chosen on the "
        "others (give two or more --data)",
    )
    loco.add_argument(
        "--lodo-grid",
        action="append",
        default=[],
        metavar="SECTION.SETTING=V1,V2",
        help="with --lodo: values of a read-path setting to choose among (repeat for several; "
        "the candidates are the defaults and every combination)",
    )
    loco.add_argument(
        "--lodo-try",
        action="append",
        default=[],
        metavar="'SECTION.SETTING=V ...'",
        help="with --lodo: one more candidate with exactly these settings (repeatable), e.g. "
        "to measure a rule turned off",
    )
    loco.add_argument(
        "--config",
        type=Path,
        help="tiermem's configuration (TOML): its [embedder] (for naive-rag too), "
        "[delivery], [slm], ... apply; the run sets where the store lives: a state keeps "
        "the embedded store it was written in (Edge for a new one) unless [mtm] names a "
        'kind (kind = "qdrant": local mode, to compare)',
    )
    stress = suites.add_parser(
        "stress", help="threads adding/searching/updating/deleting at once, vs one thread"
    )
    stress.add_argument("--threads", type=int, default=8)
    stress.add_argument("--seconds", type=float, default=30.0, help="each run stops by itself")
    stress.add_argument("--users", type=int, default=4)
    stress.add_argument("--seed", type=int, default=0)
    stress.add_argument("--embedder", choices=("hash", "sentence-transformers"), default="hash")
    served = suites.add_parser(
        "service", help="latency through tiermem serve beside the in-process Memory, one run"
    )
    served.add_argument("--clients", type=int, default=8, help="concurrent clients")
    served.add_argument("--requests", type=int, default=50, help="requests per client")
    served.add_argument("--out", type=Path, help="also write the results as JSON here")
    return suites


def run_config(path: Path | None) -> TiermemConfig:
    """tiermem's configuration for a benchmark: ``--config``'s file, else the defaults. A file
    that names no store (no ``[mtm]``) leaves each state directory its own embedded store, as
    a run without a file does (``tiermem.bench.systems.Tiermem.build``): the store of the
    default data directory is no run's, and a run resumed over a state written in local mode
    keeps reading it."""
    if path is None:
        return TiermemConfig()
    from tiermem.settings import load_config, names_store

    config = load_config(path, {})
    return (
        config if names_store(path, {}) else config.model_copy(update={"mtm": TiermemConfig().mtm})
    )


def run_bench(args: argparse.Namespace, console: Console) -> None:
    """Run the suite ``args`` name."""
    if args.suite == "locomo":
        from tiermem.bench.locomo import RunConfig
        from tiermem.bench.suite import dataset_configs, run_all

        tiermem = run_config(args.config)
        base = RunConfig(
            data=Path(),  # each data set's file, in dataset_configs
            out=args.out,
            systems=tuple(x.strip() for x in args.systems.split(",") if x.strip()),
            conversations=parse_names(args.conversations, "--conversations"),
            max_questions=args.max_questions,
            sample=args.sample,
            k=args.k,
            budgets=parse_budgets(args.budget),
            model=args.model,
            roles=_roles(args.roles),
            generator=args.generator,
            judge_url=args.judge_url,
            judge_model=args.judge_model,
            resume=args.resume,
            split=args.split,
            embed_cache=args.embed_cache,
            embedder=tiermem.embedder,
            tiermem=tiermem,
        )
        configs = dataset_configs(base, args.data, args.bursty)
        if args.lodo:
            from tiermem.bench.lodo import parse_grid, run_lodo

            run_lodo(configs, parse_grid(args.lodo_grid, args.lodo_try), args.out, console)
        elif args.lodo_grid or args.lodo_try:
            raise InvalidInputError("--lodo-grid and --lodo-try choose for --lodo: add --lodo")
        else:
            run_all(configs, args.out, console)
    elif args.suite == "stress":
        from tiermem.bench.stress import main as stress_main

        stress_main(args.threads, args.seconds, args.embedder, args.users, args.seed, console)
    elif args.suite == "service":
        from tiermem.bench.service import main as service_main

        service_main(
            positive(args.clients, "--clients"),
            positive(args.requests, "--requests"),
            args.out,
            console,
        )
    elif args.suite == "updates":
        from tiermem.bench.updates import UpdatesConfig, run_updates
        from tiermem.config import EmbedderConfig

        run_updates(
            UpdatesConfig(
                args.out,
                parse_budgets(args.budget) or UpdatesConfig.budgets,
                positive(args.users, "--users"),
                args.seed,
                args.model,
                EmbedderConfig(kind=args.embedder),
                run_config(args.config),
            ),
            console,
        )
    else:
        from tiermem.bench.mtm import main as mtm_main

        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        users = positive(args.users, "--users")
        stores = parse_names(args.stores, "--stores") or ()
        mtm_main(sizes, args.samples, args.embedder, args.out, console, users, stores)


def parse_names(text: str | None, option: str) -> tuple[str, ...] | None:
    """A comma-separated list as typed (``0,conv-30``); ``None`` when not given."""
    if text is None:
        return None
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if not names:
        raise InvalidInputError(f"{option} names nothing: {text!r}")
    return names


def parse_budgets(text: str | None) -> tuple[int, ...] | None:
    """``--budget 300,600``: positive token counts."""
    names = parse_names(text, "--budget")
    if names is None:
        return None
    if not all(x.isdigit() and int(x) > 0 for x in names):
        raise InvalidInputError(f"--budget takes positive token counts like 300,1200, got {text!r}")
    return tuple(int(x) for x in names)


def positive(value: int, option: str) -> int:
    """``value`` of ``option`` if it is above zero, else an ``InvalidInputError``."""
    if value <= 0:
        raise InvalidInputError(f"{option} must be positive, got {value}")
    return value


def _roles(text: str) -> tuple[str, ...]:
    """``--roles controller,selector``: known online roles, at least one."""
    names = parse_names(text, "--roles") or ()
    unknown = [x for x in names if x not in ONLINE_ROLES]
    if unknown or not names:
        raise InvalidInputError(f"--roles takes some of {', '.join(ONLINE_ROLES)}, got {text!r}")
    return names
