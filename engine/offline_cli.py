"""``tiermem consolidate`` and ``tiermem ltm``: the offline job from the command line (the edge:
it reads config files and the environment; ``tiermem.offline`` itself never imports ``Memory``).

The embedded Qdrant store is locked to one process, so this runs against a data directory
that no service holds open (or against a Qdrant server, which any number of processes share).
The knowledge graph has one writer whatever the store: a running memory with LTM on holds its
LTM directory, and ``consolidate`` refuses to start beside it (``LTMLockedError``). A running
``tiermem serve`` owns its whole data directory, and ``consolidate`` refuses that too
(``DataDirLockedError``): the service's own scheduler consolidates. While it runs,
``consolidate`` owns the directory the same way, so no service starts beside it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from rich.console import Console
from rich.table import Table
from tiermem.config import LlamaCppConfig, TiermemConfig
from tiermem.ltm.persist import DirectoryLock
from tiermem.memory import Memory
from tiermem.offline.consolidate import ConsolidationReport
from tiermem.ownership import claim_data_dir


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
            update={"backend": LlamaCppConfig(model=model, n_threads=None)}
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
    claim = None if config.data_dir is None else claim_data_dir(config.data_dir)
    try:
        refuse_if_held(config)
        _consolidate(config, user, once, console)
    finally:
        if claim is not None:
            claim.release()


def _consolidate(config: TiermemConfig, user: str | None, once: bool, console: Console) -> None:
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


def refuse_if_held(config: TiermemConfig) -> None:
    """Refuse, naming the holder's pid, when a running memory holds this LTM directory. The
    memory opened next takes the lock for good; checking first says why plainly, before the
    embedded store's own lock refuses with a vaguer message."""
    if config.ltm.path is not None:
        DirectoryLock.acquire(config.ltm.path.expanduser()).release()


def print_report(report: ConsolidationReport, console: Console) -> None:
    table = Table(title="consolidation run")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key, value in report.summary().items():
        table.add_row(key.replace("_", " "), str(value))
    console.print(table)


def show_ltm(config_file: Path | None, data_dir: Path | None, top: int, console: Console) -> None:
    """Print the graph's items, most supported first, with evidence and confidence now."""
    import secrets
    from datetime import UTC, datetime

    from tiermem.ltm import LongTermMemory, Provenance

    config = cli_config(config_file, data_dir, None, once=True)
    path = config.ltm.path.expanduser() if config.ltm.path is not None else None
    if path is None or not (path / "graph.json").exists():
        console.print(f"no knowledge graph at {path}")
        return
    # Reading needs no provenance secret: a throwaway one, so nothing is created on disk; and
    # no lock, so it works beside a running service.
    ltm = LongTermMemory(
        path, config.embedder.dim, Provenance(secrets.token_bytes(32)), read_only=True
    )
    facts = sorted(ltm.inventory(datetime.now(UTC)), key=lambda f: (-f.evidence, f.text))
    table = Table(title=f"LTM: {ltm.node_count} nodes, {ltm.edge_count} edges ({ltm.file})")
    for column in ("fact", "evidence", "confidence", "last supported"):
        table.add_column(column, justify="left" if column == "fact" else "right")
    for f in facts[:top]:
        table.add_row(
            f.text,
            str(f.evidence),
            f"{f.confidence.value:.2f}",
            f.last_supported.date().isoformat(),
        )
    console.print(table)
