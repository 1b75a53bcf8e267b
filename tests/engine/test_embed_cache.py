"""The bench's embedding cache: the same vectors bit for bit, each text embedded once, across
runs; and a whole bench run a second time embeds nothing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from rich.console import Console
from tiermem.bench.embed_cache import CachedEmbedder
from tiermem.bench.locomo import RunConfig, run
from tiermem.config import EmbedderConfig
from tiermem.embedding import EmbedMode, build_embedder, register_embedder
from tiermem.embedding.base import Vectors
from tiermem.embedding.hashing import HashEmbedder

from tests.engine.test_bench_locomo import FIXTURE


class CountingEmbedder(HashEmbedder):
    """The hash embedder, counting every text it is asked to embed (across instances)."""

    embedded: ClassVar[list[str]] = []

    def embed(self, texts: Sequence[str], mode: EmbedMode) -> Vectors:
        CountingEmbedder.embedded.extend(texts)
        return super().embed(texts, mode)


register_embedder("counting-hash", lambda config: CountingEmbedder(dim=config.dim))
COUNTING = EmbedderConfig(kind="counting-hash")


@pytest.fixture(autouse=True)
def _reset() -> None:
    CountingEmbedder.embedded.clear()


def test_vectors_are_identical_and_never_recomputed(tmp_path: Path) -> None:
    texts = ["I adopted a cat called Tofu.", "The orchestra plays Mahler.", "ok"]
    plain = HashEmbedder().embed(texts, EmbedMode.DOCUMENT)
    with CachedEmbedder(build_embedder(COUNTING), tmp_path) as cached:
        first = cached.embed(texts + texts[:1], EmbedMode.DOCUMENT)
        assert CountingEmbedder.embedded == texts  # the repeated text embedded once
        again = cached.embed(list(reversed(texts)), EmbedMode.DOCUMENT)
        assert CountingEmbedder.embedded == texts
        assert (cached.hits, cached.misses) == (4, 3)
        cached.embed(texts[:1], EmbedMode.QUERY)  # a mode is a key of its own
        assert CountingEmbedder.embedded == [*texts, texts[0]]
    assert first.dtype == np.float32
    assert first.shape == (4, 384)
    assert np.array_equal(first[:3], plain)
    assert np.array_equal(again, plain[::-1])
    CountingEmbedder.embedded.clear()
    with CachedEmbedder(build_embedder(COUNTING), tmp_path) as reopened:  # a later run
        assert np.array_equal(reopened.embed(texts, EmbedMode.DOCUMENT), plain)
        assert reopened.embed([], EmbedMode.DOCUMENT).shape == (0, 384)
    assert CountingEmbedder.embedded == []


def test_each_embedder_and_dimension_has_its_own_file(tmp_path: Path) -> None:
    with (
        CachedEmbedder(HashEmbedder(64), tmp_path) as small,
        CachedEmbedder(HashEmbedder(384), tmp_path) as large,
    ):
        assert small.path != large.path
        assert small.embed(["x"], EmbedMode.DOCUMENT).shape == (1, 64)
        assert large.embed(["x"], EmbedMode.DOCUMENT).shape == (1, 384)
        assert small.name == "hash-64"
        assert large.dim == 384


def test_a_second_bench_run_embeds_nothing(tmp_path: Path) -> None:
    data = tmp_path / "fx.json"
    data.write_text(json.dumps(FIXTURE))
    cache = tmp_path / "cache"
    first = RunConfig(
        data=data,
        out=tmp_path / "one",
        k=2,
        systems=("tiermem", "naive-rag"),
        embedder=COUNTING,
        embed_cache=cache,
    )
    results = run(first, Console(quiet=True))
    assert "Ana: I adopted a cat called Tofu." in CountingEmbedder.embedded  # naive-rag's turns
    CountingEmbedder.embedded.clear()
    tiermem_only = RunConfig(**{**first.__dict__, "out": tmp_path / "t", "systems": ("tiermem",)})
    run(tiermem_only, Console(quiet=True))
    assert CountingEmbedder.embedded == []  # tiermem embedded through the cache the first time
    CountingEmbedder.embedded.clear()
    second = RunConfig(**{**first.__dict__, "out": tmp_path / "two"})
    again = run(second, Console(quiet=True))
    assert CountingEmbedder.embedded == []
    strip = lambda rs: [(r["system"], r["index"], r["delivered"]) for r in rs]  # noqa: E731
    assert strip(again["records"]) == strip(results["records"])


def test_a_cached_embedder_of_another_dimension_is_refused(tmp_path: Path) -> None:
    from tiermem.bench import BenchInputError
    from tiermem.bench.datasets import load_dataset
    from tiermem.bench.systems import Tiermem
    from tiermem.config import TiermemConfig

    data = tmp_path / "fx.json"
    data.write_text(json.dumps(FIXTURE))
    (sample,), _ = load_dataset(data)
    with CachedEmbedder(HashEmbedder(64), tmp_path / "cache") as small:
        system = Tiermem(TiermemConfig(embedder=COUNTING), tmp_path / "state", 2, small)
        with pytest.raises(BenchInputError, match="gives 64-d vectors, the store is configured"):
            system.build(sample)
