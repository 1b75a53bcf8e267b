"""An on-disk memo of an embedder's vectors, so a second benchmark run embeds nothing twice.

Embedding dominates a run on long data (LongMemEval S: about 59,000 turns of ~1,000
characters). :class:`CachedEmbedder` implements the :class:`~tiermem.embedding.base.Embedder`
protocol around any embedder: a vector is keyed by (embedder name, mode, sha256 of the text)
and kept in one SQLite file per embedder and dimension under the cache folder, shared by every
system of the run (naive-rag and tiermem) and by later runs. Vectors come back bit for bit.

>>> import tempfile
>>> from tiermem.embedding.hashing import HashEmbedder
>>> with tempfile.TemporaryDirectory() as d, CachedEmbedder(HashEmbedder(64), Path(d)) as e:
...     first = e.embed(["a cat", "a dog", "a cat"], EmbedMode.DOCUMENT)
...     again = e.embed(["a dog"], EmbedMode.DOCUMENT)
...     bool((first[1] == again[0]).all()), (e.hits, e.misses), e.path.name
(True, (2, 2), 'hash-64-64.sqlite')
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import numpy as np
from tiermem.bench import BenchInputError
from tiermem.embedding.base import Embedder, EmbedMode, Vectors, check_vectors

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    mode TEXT NOT NULL,
    digest BLOB NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (mode, digest)
) WITHOUT ROWID
"""
_LOOKUP_BATCH = 500  # below SQLite's bound on query parameters


def text_key(text: str) -> bytes:
    """The sha256 of ``text`` (UTF-8, surrogates escaped), the cache's key with the mode."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def cache_file(directory: Path, name: str, dim: int) -> Path:
    """One file per embedder and dimension, its name made safe for any file system.

    >>> cache_file(Path("c"), "sentence-transformers/all-MiniLM-L6-v2", 384).name
    'sentence-transformers_all-MiniLM-L6-v2-384.sqlite'
    """
    return directory / f"{re.sub(r'[^A-Za-z0-9._-]+', '_', name)}-{dim}.sqlite"


class CachedEmbedder:
    """``inner``'s vectors, memoised on disk under ``directory``. Counts ``hits`` and
    ``misses`` (texts embedded by ``inner``) since it was opened."""

    def __init__(self, inner: Embedder, directory: Path) -> None:
        self._inner = inner
        self.path = cache_file(directory.expanduser(), inner.name, inner.dim)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False)
            self._db.execute(_SCHEMA)
            self._db.commit()
        except (OSError, sqlite3.Error) as exc:
            raise BenchInputError(f"cannot open the embedding cache {self.path}: {exc}") from exc

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def dim(self) -> int:
        return self._inner.dim

    def embed(self, texts: Sequence[str], mode: EmbedMode) -> Vectors:
        keys = [text_key(t) for t in texts]
        with self._lock:
            found = self._lookup(mode, list(dict.fromkeys(keys)))
            todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
            if todo:
                fresh = check_vectors(
                    self._inner.embed(list(todo.values()), mode), len(todo), self.dim, self.name
                )
                rows = []
                for key, vector in zip(todo, fresh, strict=True):
                    found[key] = np.array(vector, dtype=np.float32)
                    rows.append((mode.value, key, found[key].tobytes()))
                self._store(rows)
            self.misses += len(todo)
            self.hits += len(keys) - len(todo)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, key in enumerate(keys):
            out[row] = found[key]
        return out

    def _lookup(self, mode: EmbedMode, keys: list[bytes]) -> dict[bytes, Vectors]:
        found: dict[bytes, Vectors] = {}
        try:
            for start in range(0, len(keys), _LOOKUP_BATCH):
                batch = keys[start : start + _LOOKUP_BATCH]
                marks = ",".join("?" * len(batch))
                for digest, blob in self._db.execute(
                    f"SELECT digest, vector FROM vectors WHERE mode = ? AND digest IN ({marks})",
                    (mode.value, *batch),
                ):
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape == (self.dim,):  # a torn or foreign row is recomputed
                        found[bytes(digest)] = vector
        except sqlite3.Error as exc:
            raise BenchInputError(f"cannot read the embedding cache {self.path}: {exc}") from exc
        return found

    def _store(self, rows: list[tuple[str, bytes, bytes]]) -> None:
        try:
            with self._db:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)
        except sqlite3.Error as exc:
            raise BenchInputError(f"cannot write the embedding cache {self.path}: {exc}") from exc

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> CachedEmbedder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = ["CachedEmbedder", "cache_file", "text_key"]
