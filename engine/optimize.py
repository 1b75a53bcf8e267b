"""``tiermem optimize``: HNSW graphs for a data directory's Edge shards, built while the
memory is closed.

Edge 0.9.0 has no background optimizer, and its ``optimize()`` holds the GIL until it is done:
101.7 s for a shard of 10^5 entries on two cores (``bench mtm``), during which the process
answers nothing. So the online path never builds a graph (``tiermem.stores.edge``), and this
command does. It takes the data directory's claim, which keeps a service out; a shard that a
library ``Memory`` (or any other process) holds is reported and left as it was, and while a
shard's graph is built, another process that asks for that user gets ``ShardLockedError``.

Each user's shard whose vectors pass the indexing threshold of a Qdrant server collection
(``GRAPH_THRESHOLD_KB``: 10,000 KiB, about 6,700 entries of 384 dimensions) gets the graph a
server would build; smaller shards stay plain, searched in full. Searches then read the
graph, approximately, as a server's do. Entries added later go to a plain segment beside it,
searched in full, and a later run indexes that segment once it passes the threshold on its
own. Stopped anywhere (kill -9 included), a run loses nothing: Edge builds the graph in a
segment of its own and swaps it in; the next opening removes what a stopped build left.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from tiermem.config.stores import EdgeStoreConfig
from tiermem.errors import ConfigError, StoreError
from tiermem.stores.edge_schema import GRAPH_THRESHOLD_KB
from tiermem.stores.edge_shards import GraphReport


@dataclass(frozen=True, slots=True)
class OptimizeReport:
    """Each shard's report, and where the shards are."""

    shards: tuple[GraphReport, ...]
    path: Path

    @property
    def graphed(self) -> list[GraphReport]:
        return [r for r in self.shards if r.indexed]

    @property
    def failed(self) -> list[GraphReport]:
        return [r for r in self.shards if r.error is not None]


def run_optimize(
    config_file: Path | None, data_dir: Path | None, console: Console
) -> OptimizeReport:
    """``tiermem optimize``: graphs for the configured Edge shards (``mtm.path``, by default
    ``<data_dir>/edge``), under the data directory's claim. ``StoreError`` after the report
    when a shard was left as it was."""
    from tiermem.embedding import build_embedder
    from tiermem.ownership import claim_data_dir
    from tiermem.settings import load_config
    from tiermem.stores import build_mtm_store
    from tiermem.stores.edge import EdgeStore

    environ = dict(os.environ)
    if data_dir is not None:
        environ["TIERMEM_DATA_DIR"] = str(data_dir)
    config = load_config(config_file, environ)
    if not isinstance(config.mtm, EdgeStoreConfig):
        raise ConfigError(
            f'tiermem optimize builds graphs in Qdrant Edge shards ([mtm] kind = "edge", the '
            f"embedded default); this configuration's store is {config.mtm.kind!r} (a Qdrant "
            "server builds its own; `tiermem migrate --to edge` moves local mode to shards)"
        )
    if config.data_dir is None:
        raise ConfigError("tiermem optimize needs a data directory on disk (--data-dir)")
    if not config.mtm.path.is_dir():
        raise ConfigError(f"no Edge shards at {config.mtm.path}: is the data directory right?")
    claim = claim_data_dir(Path(config.data_dir))
    try:
        embedder = build_embedder(config.embedder)
        store = build_mtm_store(config.mtm, embedder.dim, embedder.name)
        try:
            assert isinstance(store, EdgeStore)
            report = OptimizeReport(tuple(store.build_graphs()), config.mtm.path)
        finally:
            store.close()
    finally:
        claim.release()
    _say(report, console)
    if report.failed:
        raise StoreError(
            f"{len(report.failed)} of {len(report.shards)} shards were left as they were "
            "(above); run tiermem optimize again once that is fixed"
        )
    return report


def _say(report: OptimizeReport, console: Console) -> None:
    graphed, seconds = report.graphed, sum(r.seconds for r in report.shards)
    said = (
        f"{len(graphed)} of {len(report.shards)} shards under {report.path} hold a graph "
        f"({sum(r.indexed for r in graphed)} entries); this run took {seconds:.1f} s"
    )
    plain = len(report.shards) - len(graphed) - len(report.failed)
    if plain:
        said += (
            f"; {plain} hold under {GRAPH_THRESHOLD_KB:,} KiB of vectors (Qdrant's indexing "
            "threshold) and stay plain, searched in full"
        )
    console.print(said, highlight=False, markup=False, soft_wrap=True)
    for r in report.failed:
        console.print(f"shard {r.name}: {r.error}", highlight=False, markup=False, soft_wrap=True)
