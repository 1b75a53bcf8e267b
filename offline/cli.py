"""``tiermem consolidate``: the offline job from the command line.

The embedded Qdrant store is locked to one process, so this runs against a data directory
that no service holds open (or against a Qdrant server, which any number of processes share).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from rich.console import Console
from rich.table import Table
from tiermem.config import BackendConfig, TiermemConfig
from tiermem.memory import Memory
from tiermem.offline.consolidate import ConsolidationReport


def cli_config(
    config_file: Path | None, data_dir: Path | None, model: str | None, once: bool
) -> TiermemConfig:
    from tiermem.settings import load_config

    environ = dict(os.environ)
    if data_dir is not None:
        environ["TIERMEM_DATA_DIR"] = str(data_dir)
    config = load_config(config_file, environ)
    consolidation = config.ltm.consolidation
    if model is not None:
        consolidation = consolidation.model_copy(
            update={"backend": BackendConfig(kind="llamacpp", model=model, n_threads=None)}
        )
    if once:  # no background schedule in a one-shot process
        consolidation = consolidation.model_copy(update={"interval_minutes": 0.0})
    ltm = config.ltm.model_copy(update={"enabled": True, "consolidation": consolidation})
    return config.model_copy(update={"ltm": ltm})


def consolidate(
    config_file: Path | None,
    data_dir: Path | None,
    user: str | None,
    model: str | None,
    once: bool,
    console: Console,
) -> None:
    config = cli_config(config_file, data_dir, model, once)
    with Memory(config) as memory:
        if once:
            print_report(memory.consolidate_now(user), console)
            return
        minutes = config.ltm.consolidation.interval_minutes
        console.print(f"consolidating every {minutes:g} min; Ctrl-C to stop")
        print_report(memory.consolidate_now(user), console)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            console.print("stopping after the chunk in flight")


def print_report(report: ConsolidationReport, console: Console) -> None:
    table = Table(title="consolidation run")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key, value in report.summary().items():
        table.add_row(key.replace("_", " "), str(value))
    console.print(table)
