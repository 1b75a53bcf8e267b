"""An exact cosine index over the graph's nodes and edges, kept in step with the graph: every
insert, text change and removal in ``KnowledgeGraph`` goes through it."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


def normalized(vector: npt.ArrayLike) -> Vector:
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


class VectorIndex:
    """Ids and unit vectors in one matrix; removal swaps the last row into the hole."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._matrix = np.zeros((16, dim), dtype=np.float32)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._pos

    def upsert(self, item_id: str, vector: npt.ArrayLike) -> None:
        v = normalized(vector)
        if v.shape != (self.dim,):
            raise ValueError(f"vector of dim {v.shape[0]} in an index of dim {self.dim}")
        pos = self._pos.get(item_id)
        if pos is None:
            pos = len(self._ids)
            if pos == self._matrix.shape[0]:
                self._matrix = np.vstack([self._matrix, np.zeros_like(self._matrix)])
            self._ids.append(item_id)
            self._pos[item_id] = pos
        self._matrix[pos] = v

    def remove(self, item_id: str) -> None:
        pos = self._pos.pop(item_id, None)
        if pos is None:
            return
        last = len(self._ids) - 1
        if pos != last:
            moved = self._ids[last]
            self._ids[pos] = moved
            self._matrix[pos] = self._matrix[last]
            self._pos[moved] = pos
        self._ids.pop()

    def search(
        self, vector: npt.ArrayLike, n: int, *, min_score: float = -1.0, prefix: str = ""
    ) -> list[tuple[str, float]]:
        """The ``n`` nearest ids (optionally only those starting with ``prefix``) at or above
        ``min_score``, best first; ties keep insertion order."""
        if not self._ids or n <= 0:
            return []
        scores = self._matrix[: len(self._ids)] @ normalized(vector)
        out: list[tuple[str, float]] = []
        for i in np.argsort(-scores, kind="stable"):
            score = float(scores[i])
            if score < min_score:
                break
            if self._ids[i].startswith(prefix):
                out.append((self._ids[i], score))
                if len(out) == n:
                    break
        return out
