"""The service's commands of the ``tiermem`` CLI: ``serve``, ``keys add|list`` and ``inspect``.
Imported by every CLI run, so nothing heavy is imported before a command runs."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from rich.console import Console

SERVICE_COMMANDS = ("serve", "keys", "inspect")


def add_service_parsers(commands: Any) -> None:
    """``serve``, ``keys`` and ``inspect`` on the CLI's subcommands (an argparse subparsers
    action)."""
    serve = commands.add_parser(
        "serve", help="serve the memory over HTTP to RemoteMemory clients, one tenant per key"
    )
    serve.add_argument("--config", type=Path, help="a TOML file (its [service] table: limits)")
    serve.add_argument("--host", default="127.0.0.1", help="0.0.0.0 in a container")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument(
        "--keys", type=Path, help="the API keys file (default $TIERMEM_API_KEYS_FILE)"
    )
    serve.add_argument(
        "--access-log", action="store_true", help="log each request (its URL holds user ids)"
    )
    keys = commands.add_parser("keys", help="the service's API keys, stored hashed")
    keys_commands = keys.add_subparsers(dest="keys_command", required=True)
    add = keys_commands.add_parser("add", help="print a new key for TENANT once; keep its hash")
    add.add_argument("tenant", help="1-32 of a-z 0-9 _ -")
    add.add_argument("--keys", type=Path, help="the API keys file (default $TIERMEM_API_KEYS_FILE)")
    add.add_argument(
        "--admin", action="store_true", help="may also consolidate every user, read the scheduler"
    )
    listing = keys_commands.add_parser("list", help="the tenants that have a key")
    listing.add_argument("--keys", type=Path)
    _add_inspect_parser(commands)


def _add_inspect_parser(commands: Any) -> None:
    inspect = commands.add_parser(
        "inspect",
        help="browse an embedded data directory's memory in a browser, read-only, on 127.0.0.1",
        description="Serve the inspector page (the one `tiermem serve` has at /inspect) over "
        "DATA_DIR, read-only: erasing and every other write are refused. It prints the page's "
        "address with a key made for this run.",
    )
    inspect.add_argument("data_dir", type=Path, metavar="DATA_DIR", help="the memory's data_dir")
    inspect.add_argument("--config", type=Path, help="a TOML file (the directory's settings)")
    inspect.add_argument(
        "--embedder",
        choices=("sentence-transformers", "hash"),
        help="instead of the config's: the one that wrote the directory",
    )
    inspect.add_argument("--port", type=int, default=8765)


def run_service_command(args: argparse.Namespace, console: Console) -> int:
    from tiermem.service import server

    environ = dict(os.environ)
    if args.command == "inspect":
        from tiermem.service import embedded

        config = embedded.inspect_config(args.data_dir, args.config, args.embedder, environ)

        def show(url: str) -> None:
            console.print(f"tiermem inspect {config.data_dir} (read-only): open", highlight=False)
            print(url, flush=True)  # alone on its line: the key is in it

        embedded.serve_inspector(config, args.port, announce=show)
        return 0
    if args.command == "serve":
        settings = server.resolve(args.config, args.keys, environ)

        def announce(url: str) -> None:
            console.print(
                f"tiermem serving {settings.memory.data_dir} on {url} "
                f"(keys: {settings.keys_file}); SIGTERM or Ctrl-C stops it gracefully",
                highlight=False,
            )

        server.serve(settings, args.host, args.port, access_log=args.access_log, announce=announce)
        return 0
    from tiermem.service.keys import add_key, list_tenants

    path = server.keys_file_for(args.keys, environ)
    if args.keys_command == "add":
        key = add_key(path, args.tenant, admin=args.admin)
        note = f"tenant {args.tenant}: the key below is shown once; {path} keeps its hash"
        Console(stderr=True).print(note, highlight=False)
        print(key)  # alone on stdout: KEY=$(tiermem keys add acme)
        return 0
    for tenant in list_tenants(path):
        console.print(f"{tenant.name}{'  (admin)' if tenant.admin else ''}", highlight=False)
    return 0
