"""One registry shape for every provider family: each is a ``tiermem.registry.Registry``, an
unknown kind names the known ones, a taken name is refused unless replaced on purpose, and a
block's registration gives back what was there."""

from __future__ import annotations

import pytest
from tiermem.config import EmbedderConfig, MTMConfig
from tiermem.embedding import build_embedder
from tiermem.embedding.registry import EMBEDDERS
from tiermem.errors import ConfigError, UnknownProviderError
from tiermem.registry import Registry
from tiermem.slm.registry import BACKENDS, CONTEXT_PER_OWNER
from tiermem.slm.roles.selectors import SELECTORS
from tiermem.stores.factory import SERVER, STORES, build_mtm_store

FAMILIES: dict[str, Registry] = {  # type: ignore[type-arg]
    "slm backend": BACKENDS,
    "embedder": EMBEDDERS,
    "mtm store": STORES,
    "selector": SELECTORS,
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
    assert [k for k in STORES.names() if STORES.can(k, SERVER)] == ["url"]


def test_an_unknown_store_location_is_refused_with_the_known_ones() -> None:
    config = MTMConfig.model_construct(location="sqlite")  # past the config's own check
    with pytest.raises(UnknownProviderError, match="memory, path, reference, url"):
        build_mtm_store(config, 8)
