"""``tiermem migrate --to edge``: a data directory's MTM moved from qdrant-client's embedded
mode (``<data_dir>/qdrant``) to Qdrant Edge shards (``<data_dir>/edge``).

Each user's entries are moved as they are stored, vectors too (nothing is embedded again),
one user at a time, each user all or nothing (``EdgeStore.replace_user`` fills a staging
shard and moves it in place). The users are the journal's. Stopped anywhere, a second run
skips the users whose shard already holds exactly their entries and moves the rest. Every
user is verified: the same entry ids on both sides, and for a sample of entries the same
dense and BM25 rankings (searched by the entry's own vector and text), to the score. Nothing
is written to the source: once the configuration says ``[mtm] kind = "edge"`` and the
memory works, its files can be removed.

>>> import tempfile
>>> from pathlib import Path
>>> from tiermem.stores.edge import EdgeStore
>>> from tiermem.stores.reference import ReferenceStore
>>> target = EdgeStore(Path(tempfile.mkdtemp()), dim=8, prefix="t_")
>>> migrate_users(ReferenceStore(8), target, ["ana"])
MigrationReport(users=0, entries=0, already=0, empty=1, searches=0)
>>> target.close()
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from tiermem.config import MTMConfig, QdrantConfig
from tiermem.config.stores import EdgeStoreConfig
from tiermem.errors import (
    ConfigError,
    EmbedderMismatchError,
    InvalidLimitError,
    StoreError,
    shown,
)
from tiermem.render import index_text
from tiermem.stores.base import EmbedderRecord, MTMStore, ScoredEntry
from tiermem.types import MemoryEntry, SearchFilters

logger = logging.getLogger(__name__)

SAMPLE = 5  # entries per user searched on both sides
_K = 10
_EVERY = SearchFilters(include_superseded=True)


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """Users moved now (and their entries), users whose shard held them already, users with
    no entries (nothing to move), and the searches compared on both sides."""

    users: int
    entries: int
    already: int
    empty: int
    searches: int


def migrate_users(
    source: MTMStore,
    target: MTMStore,
    users: Iterable[str],
    *,
    sample: int = SAMPLE,
    record: EmbedderRecord | None = None,
    on_user: Callable[[str, int], None] | None = None,
) -> MigrationReport:
    """Move each of ``users`` from ``source`` to ``target`` and verify it (see the module).
    ``record``: the embedder ``target`` records; a user whose entries another embedder wrote
    is refused (``EmbedderMismatchError``: reindex first). ``on_user(user, entries)`` is
    called after each user moved."""
    moved = entries = already = empty = searches = 0
    for user in users:
        stored = source.export_user(user)
        if not stored.found or not stored.entries:
            empty += 1
            continue
        if record is not None and stored.embedder not in (None, record):
            found = stored.embedder
            assert found is not None
            raise EmbedderMismatchError(user, found.name, found.dim, record.name, record.dim)
        ids = [e.id for e in stored.entries]
        if target.list_entries(user) == stored.entries:
            already += 1  # a run that stopped moved this one: checked again below
        else:
            target.replace_user(user, stored.entries, _vectors(source, user, ids))
            moved += 1
            entries += len(ids)
        searches += verify_user(source, target, user, stored.entries, sample)
        if on_user is not None:
            on_user(user, len(ids))
    return MigrationReport(moved, entries, already, empty, searches)


def _vectors(source: MTMStore, user: str, ids: Sequence[str]) -> np.ndarray:
    stored = source.stored_vectors(user, ids)
    missing = [i for i in ids if i not in stored]
    if missing:
        raise StoreError(f"user {shown(user)}: {len(missing)} entries have no stored vector")
    return np.stack([stored[i] for i in ids]).astype(np.float32)


def verify_user(
    source: MTMStore, target: MTMStore, user: str, entries: Sequence[MemoryEntry], sample: int
) -> int:
    """Raise ``StoreError`` unless ``target`` holds the user's entries as ``source`` does and
    ranks a sample of them alike: dense by the entry's stored vector, BM25 by its index text.
    Returns the searches compared."""
    mine = {e.id: e for e in target.list_entries(user, _EVERY)}
    if target.count(user) != len(entries) or any(mine.get(e.id) != e for e in entries):
        raise StoreError(f"user {shown(user)}: the moved entries differ from the source's")
    picked = [entries[i * len(entries) // sample] for i in range(min(sample, len(entries)))]
    vectors = source.stored_vectors(user, [e.id for e in picked])
    for entry in picked:
        vector = vectors[entry.id]
        text = index_text(entry)
        want = source.hybrid_search(user, vector, text, _EVERY, _K)
        got = target.hybrid_search(user, vector, text, _EVERY, _K)
        if not (same_ranking(want.dense, got.dense) and same_ranking(want.lexical, got.lexical)):
            raise StoreError(
                f"user {shown(user)}: a search for entry {entry.id} ranks otherwise after the "
                "move; the source is untouched, and the shard is replaced on the next run"
            )
    return 2 * len(picked)


def same_ranking(want: Sequence[ScoredEntry], got: Sequence[ScoredEntry]) -> bool:
    """The same scores in the same order (to 1e-4), and the same entries above the last
    group of tied scores (where the limit cuts a tie, either side may keep either).

    >>> from datetime import UTC, datetime
    >>> from tiermem.types import MemoryKind
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> hit = lambda i, s: ScoredEntry(MemoryEntry(i, "u", "x", MemoryKind.FACT, t, t), s)
    >>> same_ranking([hit("a", 0.9), hit("b", 0.5)], [hit("a", 0.9), hit("c", 0.5)])
    True
    >>> same_ranking([hit("a", 0.9), hit("b", 0.5)], [hit("b", 0.9), hit("a", 0.5)])
    False
    """
    if len(want) != len(got) or any(
        abs(w.score - g.score) > 1e-4 for w, g in zip(want, got, strict=True)
    ):
        return False
    if not want:
        return True
    last = want[-1].score
    return {w.entry.id for w in want if w.score - last > 1e-4} == {
        g.entry.id for g in got if g.score - last > 1e-4
    }


def run_migrate(
    config_file: Path | None, data_dir: Path | None, to: str, sample: int, console: Console
) -> MigrationReport:
    """``tiermem migrate --to edge``: the data directory's embedded Qdrant (``mtm.path``, or
    ``<data_dir>/qdrant``) into Edge shards (``mtm.path`` when the configuration names kind
    ``edge`` already, else ``<data_dir>/edge``), under the data directory's claim (no
    service beside it). The configured embedder is the one the shards record."""
    from tiermem.embedding import build_embedder
    from tiermem.journal import Journal
    from tiermem.ownership import claim_data_dir
    from tiermem.settings import load_config, names_store
    from tiermem.stores import build_mtm_store

    if to != "edge":
        raise ConfigError(f"tiermem migrate moves to 'edge' only, not {to!r}")
    if sample < 1:
        raise InvalidLimitError("--sample", sample)
    environ = dict(os.environ)
    if data_dir is not None:
        environ["TIERMEM_DATA_DIR"] = str(data_dir)
    config = load_config(config_file, environ)
    if config.data_dir is None or config.journal.path is None:
        raise ConfigError("tiermem migrate needs a data directory on disk (--data-dir)")
    root = Path(config.data_dir)
    source, target = _stores(config.mtm, root)
    if source.path is None or not source.path.exists():
        raise ConfigError(f"no embedded Qdrant store to move at {source.path}")
    claim = claim_data_dir(root)
    try:
        embedder = build_embedder(config.embedder)
        record = EmbedderRecord(embedder.name, embedder.dim)
        journal = Journal(config.journal.path)
        try:
            users = journal.user_ids()
        finally:
            journal.close()
        old = build_mtm_store(source, embedder.dim, embedder.name)
        new = build_mtm_store(target, embedder.dim, embedder.name)
        try:
            report = migrate_users(
                old,
                new,
                users,
                sample=sample,
                record=record,
                on_user=lambda user, n: logger.info("moved a user's %d entries", n),
            )
        finally:
            new.close()
            old.close()
    finally:
        claim.release()
    console.print(
        f"moved {report.users} users ({report.entries} entries) to {target.path}; "
        f"{report.already} were there already, {report.empty} had no entries; "
        f"{report.searches} searches ranked alike on both sides",
        highlight=False,
    )
    if isinstance(config.mtm, EdgeStoreConfig) or not names_store(config_file, environ):
        use = "the data directory opens them from now on"  # embedded_mtm: shards are there
    else:
        use = f'set [mtm] kind = "edge" (path = "{target.path}") to use them'
    console.print(
        f"{use}; the files under {source.path} are left as they were: remove them once the "
        "memory works",
        highlight=False,
        markup=False,
    )
    return report


def _stores(mtm: MTMConfig, root: Path) -> tuple[QdrantConfig, EdgeStoreConfig]:
    """Where the store is moved from and to, with the configured prefix and capacity."""
    prefix, capacity = mtm.collection_prefix, mtm.capacity
    if isinstance(mtm, QdrantConfig) and mtm.location == "path" and mtm.path is not None:
        source = mtm
    else:
        source = QdrantConfig(
            location="path", path=root / "qdrant", collection_prefix=prefix, capacity=capacity
        )
    if isinstance(mtm, EdgeStoreConfig):
        return source, mtm
    return source, EdgeStoreConfig(path=root / "edge", collection_prefix=prefix, capacity=capacity)
