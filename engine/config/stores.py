"""The MTM stores' configurations, and ``MTM``, their union discriminated on ``kind``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator
from tiermem.config.section import Section


class MTMConfig(Section):
    """Per-user episodic memory: what every store kind has. ``kind`` picks the store (a
    ``tiermem.stores.factory.STORES`` entry): ``edge`` (``EdgeStoreConfig``: Qdrant Edge
    shards, one per user, in process; the embedded default under a data directory),
    ``qdrant`` (``QdrantConfig``: a Qdrant server, or qdrant-client's local mode; where it
    lives is its ``location``) or ``reference`` (``ReferenceStoreConfig``, the exact in-memory
    oracle, for tests and baselines). ``MTM`` is their union, on ``kind``."""

    kind: str
    collection_prefix: str = Field(default="tiermem_mtm_", pattern=r"^[a-z][a-z0-9_]{0,31}$")
    capacity: int = Field(default=10_000, gt=0)


class QdrantConfig(MTMConfig):
    """Qdrant through qdrant-client. ``location``: ``url`` (a server), ``path`` (local mode on
    disk: the embedded default before Edge, kept by a data directory that holds it) or
    ``memory`` (in process, gone on close)."""

    kind: Literal["qdrant"] = "qdrant"
    location: Literal["path", "memory", "url"] = "path"
    path: Path | None = None
    url: str | None = None
    api_key: str | None = None
    timeout_s: float = Field(default=10.0, gt=0)

    @model_validator(mode="after")
    def _location_has_its_address(self) -> QdrantConfig:
        if self.location == "path" and self.path is None:
            raise ValueError("mtm.location='path' needs mtm.path")
        if self.location == "url" and not self.url:
            raise ValueError("mtm.location='url' needs mtm.url")
        return self


class EdgeStoreConfig(MTMConfig):
    """Qdrant Edge, the embedded default: Qdrant's own engine in process, one shard per user in
    its own directory under ``path`` (the CLI and the service put it under the data directory,
    ``<data_dir>/edge``). At most ``max_open_shards`` shards are open at once (the least
    recently used is closed first), so many users never mean as many open files; each open
    shard holds about 57 MiB of its files in the page cache (Edge 0.9.0 faults its text and
    keyword index pages in on opening), counted in the process's RSS: serving 40 users of
    1,000 entries at random, 8 open shards held 591 MiB, 16 held 1,066 MiB, at the same
    ``context()`` p50 (a random user's shard is seldom open either way)."""

    kind: Literal["edge"] = "edge"
    path: Path
    max_open_shards: int = Field(default=8, gt=0)


class ReferenceStoreConfig(MTMConfig):
    """The exact in-memory store that the congruence tests hold Qdrant to."""

    kind: Literal["reference"] = "reference"


def _mtm_tag(data: Any) -> str | None:
    kind = data.get("kind", "qdrant") if isinstance(data, dict) else getattr(data, "kind", None)
    return kind if isinstance(kind, str) else None


MTM = Annotated[
    Annotated[QdrantConfig, Tag("qdrant")]
    | Annotated[EdgeStoreConfig, Tag("edge")]
    | Annotated[ReferenceStoreConfig, Tag("reference")],
    Discriminator(_mtm_tag),
]
"""An MTM store's configuration, by ``kind`` (a missing kind is ``qdrant``)."""


__all__ = ["MTM", "EdgeStoreConfig", "MTMConfig", "QdrantConfig", "ReferenceStoreConfig"]
