"""One registry shape for every provider family: each is a ``tiermem.registry.Registry``, an
unknown kind names the known ones, a taken name is refused unless replaced on purpose, and a
block's registration gives back what was there."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from tiermem.config import (
    EmbedderConfig,
    MTMConfig,
    QdrantConfig,
    ReferenceStoreConfig,
    TiermemConfig,
)
from tiermem.config.stores import EdgeStoreConfig
from tiermem.embedding import build_embedder
from tiermem.embedding.registry import EMBEDDERS
from tiermem.errors import ConfigError, UnknownProviderError
from tiermem.registry import Registry
from tiermem.slm.registry import BACKENDS, CONTEXT_PER_OWNER
from tiermem.slm.roles.generator import GENERATORS
from tiermem.slm.roles.selectors import SELECTORS
from tiermem.stores.factory import STORES, build_mtm_store

FAMILIES: dict[str, Registry] = {  # type: ignore[type-arg]
    "slm backend": BACKENDS,
    "embedder": EMBEDDERS,
    "mtm store": STORES,
    "selector": SELECTORS,
    "generator": GENERATORS,
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_is_one_registry(family: str) -> None:
    registry = FAMILIES[family]
    assert isinstance(registry, Registry)
    assert registry.family == family
    with pytest.raises(UnknownProviderError) as unknown:
        registry.get("no-such-kind")
    assert unknown.value.known == registry.names()
    taken = registry.names()[0]
    with pytest.raises(ConfigError, match="registered already"):
        registry.register(taken, registry.factory(taken))


def test_a_replacement_is_on_purpose_and_a_block_gives_back_what_was_there() -> None:
    hashing = EMBEDDERS.factory("hash")
    with EMBEDDERS.registered("hash", lambda config: build_embedder(EmbedderConfig())):
        assert EMBEDDERS.factory("hash") is not hashing
    assert EMBEDDERS.factory("hash") is hashing
    with EMBEDDERS.registered("made-up", hashing):
        assert "made-up" in EMBEDDERS
    assert "made-up" not in EMBEDDERS


def test_capabilities_replace_kind_checks() -> None:
    assert BACKENDS.can("llamacpp", CONTEXT_PER_OWNER)
    assert not BACKENDS.can("ollama", CONTEXT_PER_OWNER)


def test_an_unknown_store_kind_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValidationError, match="'qdrant', 'edge', 'reference'"):
        TiermemConfig.model_validate({"mtm": {"kind": "sqlite"}})
    config = MTMConfig.model_construct(kind="sqlite")  # past the config's own check
    with pytest.raises(UnknownProviderError, match="known: edge, qdrant, reference"):
        build_mtm_store(config, 8)


def test_a_store_kind_is_one_class_and_where_qdrant_lives_is_its_location() -> None:
    """``location`` says where Qdrant lives; which store it is, is ``kind``. A field of the
    other kind is refused by name, and a missing kind is Qdrant (configuration files of the
    flat class read as they did)."""
    assert STORES.get("qdrant").config is QdrantConfig
    assert STORES.get("reference").config is ReferenceStoreConfig
    assert STORES.get("edge").config is EdgeStoreConfig
    loaded = TiermemConfig.model_validate({"mtm": {"location": "url", "url": "http://q:6333"}})
    assert isinstance(loaded.mtm, QdrantConfig)
    assert loaded.mtm.url == "http://q:6333"
    with pytest.raises(ValidationError, match=r"reference.url\n  Extra inputs"):
        TiermemConfig.model_validate({"mtm": {"kind": "reference", "url": "http://q:6333"}})
    with pytest.raises(ValidationError, match=r"qdrant.location\n  Input should be 'path', "):
        TiermemConfig.model_validate({"mtm": {"location": "reference"}})
