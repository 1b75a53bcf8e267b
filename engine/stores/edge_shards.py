"""Qdrant Edge shards on disk: one directory per shard, each locked by the process that has
it open, at most ``max_open`` open at once.

A shard's directory holds Edge's own files (``edge_config.json``, ``segments/``, ``wal/``),
``tiermem.json`` (what ``tiermem.stores.records`` keeps in a server collection's metadata:
the embedder, a reindex's state) and ``tiermem.lock``. The lock is an ``flock`` held for as
long as the shard is open: a second process that opened the same shard would corrupt the
first one's id tracker (Edge 0.9.0), so it gets ``ShardLockedError`` instead. Opening past
``max_open`` closes the least recently used shard first (its lock is released with it). A
new shard is a copy of an empty, indexed template shard that the pool makes once
(``.template-<dim>``, which holds no user's data).

Closing a shard that saw a delete since it was opened runs Edge's ``optimize()``: with no
HNSW to build (``edge_schema.shard_config``), the optimizer plans only a vacuum, and only of a
segment that is at least a fifth deleted; otherwise it returns at once. A graph is built only
by ``build_graph`` (``tiermem optimize``, the memory closed), under the shard's lock: Edge
builds it in a new segment (under ``temp_segments``) and swaps it in, and the online threshold
(none) is written back after. A shard whose build stopped before that is opened with the
online threshold again, so no close of the online path ever builds a graph, and what the
stopped build left in ``temp_segments`` is removed first.

Edge writes through memory maps of sparse files, so a full disk does not fail a write: the
process dies of SIGBUS. Every write, and every opening of a shard, therefore first checks
that ``MIN_FREE_BYTES`` are free on the shards' filesystem (``require_room``), and refuses
with a ``StoreError`` below that; a vacuum needs room for a copy of the shard as well.

>>> import tempfile
>>> pool = ShardPool(Path(tempfile.mkdtemp()), dim=4, max_open=1)
>>> pool.open("a", create=True) is not None, pool.open("b", create=False)
(True, None)
>>> _ = pool.open("b", create=True); pool.open_names()  # "a" was closed to make room
['b']
>>> pool.drop("a"); pool.exists("a"), pool.exists("b")
(False, True)
>>> pool.close_all()
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as qe
from tiermem.errors import StoreError
from tiermem.ltm.persist import DirectoryLock
from tiermem.stores.edge_schema import PAYLOAD_INDEXES, shard_config
from tiermem.stores.files import copy_sparse, restrict_tree
from tiermem.stores.records import STAGING_SUFFIX

logger = logging.getLogger(__name__)

LOCK_FILE = "tiermem.lock"
META_FILE = "tiermem.json"
# A WAL segment's 32 MiB and the pages one write touches, with room to spare: on tmpfs, where
# reading a hole of a shared map allocates it, opening a shard faults in about 90 MiB of maps.
MIN_FREE_BYTES = 128 * 2**20
_EDGE_CONFIG = "edge_config.json"  # Edge writes it first: a directory without it holds no shard
_TEMP_SEGMENTS = "temp_segments"  # where Edge's optimizer builds a segment before swapping it in
_T = TypeVar("_T")
_TEMPLATES: dict[int, Path] = {}  # a template this process made, by dimension


class ShardLockedError(StoreError):
    """Another process (or another open store in this one) has this user's shard open: two
    openers would corrupt it (Qdrant Edge 0.9.0), so the second is refused."""

    def __init__(self, path: object, pid: int | None) -> None:
        holder = f"process {pid}" if pid is not None else "another process"
        super().__init__(f"MTM shard {path} is in use by {holder}; stop it first")
        self.path = path
        self.pid = pid


def edge_call(what: str, fn: Callable[[], _T]) -> _T:
    """``fn()``, with whatever Edge raises as a ``StoreError``: Edge 0.9.0 raises a bare
    ``Exception`` for every engine failure (a full disk, a wrong dimension, a missing point)."""
    try:
        return fn()
    except StoreError:
        raise
    except Exception as exc:  # Edge 0.9.0 raises no narrower type: translated, never hidden
        raise StoreError(f"qdrant edge {what} failed: {exc}") from exc


@dataclass(frozen=True, slots=True)
class GraphReport:
    """One shard after ``build_graph``: its entries, how many of them a graph indexes (0: the
    shard is plain, under the threshold), and the seconds the build took; or why it was left
    as it was (``error``)."""

    name: str
    entries: int
    indexed: int
    seconds: float
    error: str | None = None  # why the shard was left as it was


@dataclass
class OpenShard:
    """A shard open in this process, its lock, and whether it saw a delete since opening."""

    name: str
    shard: qe.EdgeShard
    lock: DirectoryLock
    deleted: bool = False


class ShardPool:
    """The shards under ``root`` (one directory each, by name), opened on first use and kept
    open, least recently used first out, up to ``max_open``. Not thread-safe: its owner
    serialises calls (``EdgeStore`` holds one lock over every call)."""

    def __init__(self, root: Path, *, dim: int, max_open: int) -> None:
        self.root = root
        self._dim = dim
        self._max_open = max_open
        self._open: OrderedDict[str, OpenShard] = OrderedDict()

    def path(self, name: str) -> Path:
        return self.root / name

    def exists(self, name: str) -> bool:
        return name in self._open or (self.path(name) / _EDGE_CONFIG).exists()

    def is_open(self, name: str) -> bool:
        return name in self._open

    def open_names(self) -> list[str]:
        """The open shards, least recently used first."""
        return list(self._open)

    def open(self, name: str, *, create: bool) -> OpenShard | None:
        """Shard ``name``, opened (and locked) if it is not open; ``None`` when it does not
        exist and ``create`` is false. A new shard gets the schema's payload indexes; an
        existing one gets any it lacks (a process killed between creating and indexing)."""
        found = self._open.get(name)
        if found is not None:
            self._open.move_to_end(name)
            return found
        if not create and not self.exists(name):
            return None
        while len(self._open) >= self._max_open:
            self.close(next(iter(self._open)))
        path = self.path(name)
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        require_room(self.root, f"open MTM shard {name}")
        lock = _lock(path)
        try:
            if not (path / _EDGE_CONFIG).exists():
                self._copy_template(path)
            _clear_unfinished(path)
            # a graph build that stopped left its threshold: the online path's goes back
            online = (
                shard_config(self.stored_dim(name) or self._dim)
                if _indexing_threshold(path)
                else None
            )
            shard = edge_call("load", lambda: qe.EdgeShard.load(str(path), online))
            _ensure_indexes(shard)
        except BaseException:
            lock.release()
            raise
        opened = OpenShard(name, shard, lock)
        self._open[name] = opened
        return opened

    def _copy_template(self, path: Path) -> None:
        """Make a new shard at ``path``: a copy of the store's empty, indexed template shard
        (``_template``). Creating a shard and its indexes syncs it once per index, about ten
        times the cost of the copy."""
        _copy_shard(self._template(), path)

    def _template(self) -> Path:
        """The empty shard new ones are copied from (``.template-<dim>`` under the root, no
        user's data), made once: in a directory of its own, moved in place when complete;
        copied from another store's of this process where there is one (tests open many)."""
        template = self.root / f".template-{self._dim}"
        if (template / _EDGE_CONFIG).exists():
            return template
        staging = self.root / f"{template.name}.{os.getpid()}.{uuid.uuid4().hex}"
        known = _TEMPLATES.get(self._dim)
        if known is not None and (known / _EDGE_CONFIG).exists():
            _copy_shard(known, staging)
        else:
            config = shard_config(self._dim)
            shard = edge_call("create", lambda: qe.EdgeShard.create(str(staging), config))
            try:
                _ensure_indexes(shard)
            finally:
                edge_call("close", shard.close)
            restrict_tree(staging)
        try:
            os.rename(staging, template)
        except OSError:  # another process moved its own in first
            shutil.rmtree(staging, ignore_errors=True)
        _TEMPLATES[self._dim] = template
        return template

    def close(self, name: str) -> None:
        """Close shard ``name`` if open: optimize it if it saw a delete (a vacuum at most),
        flush and close it, its files to their owner only, its lock released."""
        opened = self._open.pop(name, None)
        if opened is None:
            return
        try:
            if opened.deleted:
                self._optimize(opened)
            edge_call("close", opened.shard.close)
            restrict_tree(self.path(name))
        finally:
            opened.lock.release()

    def _optimize(self, opened: OpenShard) -> None:
        """Edge's optimizer on a shard that saw deletes (a vacuum at most, see the module's
        docstring); skipped, and said, when the disk has no room for a copy of the shard."""
        try:
            require_room(self.root, "vacuum", extra=disk_bytes(self.path(opened.name)))
        except StoreError as exc:
            logger.warning("MTM shard %s left unvacuumed: %s", opened.name, exc)
            return
        edge_call("optimize", opened.shard.optimize)

    def names(self) -> list[str]:
        """Every shard under the root (not the template new ones are copied from, nor a
        reindex's staging copy)."""
        return sorted(
            p.name
            for p in self.root.iterdir()
            if not p.name.startswith(".")
            and not p.name.endswith(STAGING_SUFFIX)
            and (p / _EDGE_CONFIG).exists()
        )

    def build_graph(self, name: str, threshold_kb: int) -> GraphReport:
        """Build an HNSW graph in shard ``name``'s segments that pass ``threshold_kb`` of
        vectors (Edge's indexing optimizer; blocks this process, see the module's docstring),
        then write the online threshold back. ``ShardLockedError`` if another opener has it."""
        self.close(name)
        path = self.path(name)
        lock = _lock(path)
        try:
            require_room(self.root, "build a graph", extra=disk_bytes(path))
            _clear_unfinished(path)
            config = shard_config(self._dim, threshold_kb)
            shard = edge_call("load", lambda: qe.EdgeShard.load(str(path), config))
            try:
                started = time.perf_counter()
                edge_call("optimize", shard.optimize)
                seconds = time.perf_counter() - started
                info = edge_call("info", shard.info)
            finally:
                edge_call("close", shard.close)
            online = shard_config(self._dim)
            written = edge_call("load", lambda: qe.EdgeShard.load(str(path), online))
            edge_call("close", written.close)
            restrict_tree(path)
        finally:
            lock.release()
        return GraphReport(name, info.points_count, info.indexed_vectors_count, seconds)

    def close_all(self) -> None:
        errors: list[StoreError] = []
        for name in list(self._open):
            try:
                self.close(name)
            except StoreError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def drop(self, name: str) -> None:
        """Remove shard ``name``'s directory, every file of it (segments, WAL, lock), and
        check that it is gone. Taken under its lock, so no other process has it open."""
        path = self.path(name)
        opened = self._open.pop(name, None)
        if opened is None and not path.exists():
            return
        lock = opened.lock if opened is not None else _lock(path)
        try:
            if opened is not None:
                edge_call("close", opened.shard.close)
            shutil.rmtree(path, ignore_errors=True)
        finally:
            lock.release()
        if path.exists():
            raise StoreError(f"the files of MTM shard {name} could not be removed")

    def rename(self, source: str, target: str) -> None:
        """Move shard ``source``'s directory to ``target`` (which must not exist); both are
        closed first. A rename is atomic: a stop leaves one name or the other."""
        self.close(source)
        self.close(target)
        try:
            os.rename(self.path(source), self.path(target))
            _sync_dir(self.root)
        except OSError as exc:
            raise StoreError(f"cannot move MTM shard {source} to {target}: {exc}") from exc

    def read_meta(self, name: str) -> dict[str, Any] | None:
        """The shard's ``tiermem.json``, or ``None`` when it has none."""
        try:
            data = json.loads((self.path(name) / META_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot read the record of MTM shard {name}: {exc}") from exc
        return data if isinstance(data, dict) else None

    def write_meta(self, name: str, meta: Mapping[str, Any]) -> None:
        """Replace the shard's ``tiermem.json`` atomically (written, synced, renamed)."""
        path = self.path(name) / META_FILE
        staged = path.with_suffix(".tmp")
        try:
            fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, json.dumps(dict(meta)).encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(staged, path)
            _sync_dir(path.parent)
        except OSError as exc:
            with contextlib.suppress(OSError):
                staged.unlink()
            raise StoreError(f"cannot write the record of MTM shard {name}: {exc}") from exc

    def stored_dim(self, name: str) -> int | None:
        """The vector size the shard was created with, from Edge's own config file."""
        try:
            config = json.loads((self.path(name) / _EDGE_CONFIG).read_text(encoding="utf-8"))
            return int(config["vectors"]["dense"]["size"])
        except (OSError, ValueError, KeyError, TypeError):
            return None


def require_room(root: Path, what: str, extra: int = 0) -> None:
    """Raise ``StoreError`` unless ``MIN_FREE_BYTES`` (and ``extra``) are free under ``root``:
    below that, a write into one of Edge's memory maps could kill the process."""
    try:
        info = os.statvfs(root)
    except OSError as exc:
        raise StoreError(f"cannot {what}: {root} cannot be read: {exc}") from exc
    free = info.f_bavail * info.f_frsize
    if free < MIN_FREE_BYTES + extra:
        raise StoreError(
            f"cannot {what}: {free // 2**20} MiB free under {root}, and Qdrant Edge needs "
            f"{(MIN_FREE_BYTES + extra) // 2**20} MiB (its writes go through memory maps: on a "
            "full disk the process would die); free some space"
        )


def disk_bytes(path: Path) -> int:
    """The blocks the files under ``path`` occupy, in bytes (sparse files count what they hold)."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def _lock(path: Path) -> DirectoryLock:
    """The shard directory's lock (the directory is made if missing): ``ShardLockedError``
    when another opener holds it. A lock taken on a directory that was removed meanwhile
    (its holder dropped the shard) is taken again on the new one."""
    while True:
        lock = DirectoryLock.acquire(
            path, lock_file=LOCK_FILE, refused=ShardLockedError, role="an MTM shard's directory"
        )
        try:
            same = os.path.samestat(os.stat(lock.directory / LOCK_FILE), os.fstat(lock.fileno()))
        except FileNotFoundError:
            same = False
        if same:
            return lock
        lock.release()


def _copy_shard(source: Path, target: Path) -> None:
    """Copy a closed shard's files, holes kept (``copy_sparse``). Edge's config file is copied
    last, so a copy stopped half way is no shard yet, and is copied over again."""
    target.mkdir(mode=0o700, exist_ok=True)
    for item in sorted(source.rglob("*"), key=lambda p: len(p.parts)):
        if item.name == LOCK_FILE or item == source / _EDGE_CONFIG:
            continue
        copied = target / item.relative_to(source)
        if item.is_dir():
            copied.mkdir(mode=0o700, exist_ok=True)
        else:
            copy_sparse(item, copied)
    copy_sparse(source / _EDGE_CONFIG, target / f"{_EDGE_CONFIG}.tmp")
    os.replace(target / f"{_EDGE_CONFIG}.tmp", target / _EDGE_CONFIG)


def _clear_unfinished(path: Path) -> None:
    """Remove what an ``optimize()`` stopped part way left in the shard's ``temp_segments``: a
    half-built copy of its segments, which Edge never reads again and which would keep the
    text of entries deleted since (each stopped build a shard's size more on disk). Called
    under the shard's lock, before Edge opens it."""
    temp = path / _TEMP_SEGMENTS
    try:
        if not temp.is_dir():
            return
        for item in temp.iterdir():
            if item.is_dir() and not item.is_symlink():
                shutil.rmtree(item)
            else:
                item.unlink()
    except OSError as exc:
        raise StoreError(f"cannot remove what a stopped graph build left in {temp}: {exc}") from exc


def _indexing_threshold(path: Path) -> int:
    """The indexing threshold in the shard's own config file (0: none, or no file yet)."""
    try:
        config = json.loads((path / _EDGE_CONFIG).read_text(encoding="utf-8"))
        return int(config["optimizers"]["indexing_threshold"] or 0)
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def _ensure_indexes(shard: qe.EdgeShard) -> None:
    present = edge_call("info", shard.info).payload_schema
    for field, schema in PAYLOAD_INDEXES:
        if field not in present:
            index = qe.UpdateOperation.create_field_index(field, schema)
            edge_call("create_field_index", partial(shard.update, index))


def _sync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
