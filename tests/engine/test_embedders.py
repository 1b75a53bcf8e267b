"""The embedders of the serving stack: ``ollama`` through ``/api/embed`` and ``openai``
through ``/v1/embeddings``, each by its official client over real HTTP against the protocol
test server, and the configuration that picks them (one class per kind, on ``kind``; its old
name ``provider`` read with a warning)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from tiermem import Memory, TiermemConfig
from tiermem.config import (
    EmbedderConfig,
    LlamaCppEmbedderConfig,
    OllamaEmbedderConfig,
    OpenAIEmbedderConfig,
    embedder_config,
    merge_overrides,
)
from tiermem.config.section import DeprecatedSettingWarning
from tiermem.embedding import EmbedMode, build_embedder
from tiermem.embedding.hashing import HashEmbedder
from tiermem.embedding.registry import EMBEDDERS
from tiermem.errors import (
    ConfigError,
    EmbedderDimensionError,
    EmbedderError,
    EmbedderUnavailableError,
)
from tiermem.settings import load_config

from tests.conftest import chat
from tests.fakes.ollama_server import OllamaProtocolServer, serving

DIM = 768
SERVED = HashEmbedder(DIM)  # what the test server embeds with: each text as it arrives


@pytest.fixture
def server() -> Iterator[OllamaProtocolServer]:
    with serving(embedder=SERVED) as running:
        yield running


def ollama_config(server: OllamaProtocolServer, **fields: object) -> EmbedderConfig:
    return embedder_config(kind="ollama", host=server.url, retry_backoff_s=0, **fields)


def openai_config(server: OllamaProtocolServer, **fields: object) -> EmbedderConfig:
    settings: dict[str, object] = {
        "model": "nomic-embed-text",
        "dim": DIM,
        "base_url": f"{server.url}/v1",
        "retry_backoff_s": 0,
    }
    return embedder_config(kind="openai", **{**settings, **fields})


KINDS = {"ollama": (ollama_config, "/api/embed"), "openai": (openai_config, "/v1/embeddings")}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_vectors_are_the_servers_normalised_in_order_and_in_batches(
    kind: str, server: OllamaProtocolServer
) -> None:
    make, path = KINDS[kind]
    texts = ["Ana lives in Lisbon", "Comet is a greyhound", "flight TP1351", "peanuts", "bakery"]
    embedder = build_embedder(make(server, batch_size=2, query_prefix="", document_prefix=""))
    vectors = embedder.embed(texts, EmbedMode.DOCUMENT)
    assert embedder.name == f"{kind}:nomic-embed-text"
    assert vectors.dtype == np.float32
    assert vectors.shape == (5, DIM)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors, SERVED.embed(texts, EmbedMode.DOCUMENT), atol=1e-6)
    sent = [r["input"] for r in server.requests if r["path"] == path]
    assert sent == [texts[0:2], texts[2:4], texts[4:5]]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_nomic_prefixes_are_put_before_each_text_by_mode(
    kind: str, server: OllamaProtocolServer
) -> None:
    make, _ = KINDS[kind]
    embedder = build_embedder(make(server))
    query = embedder.embed(["where does Ana live"], EmbedMode.QUERY)
    document = embedder.embed(["Ana lives in Lisbon"], EmbedMode.DOCUMENT)
    assert [r["input"] for r in server.requests] == [
        ["search_query: where does Ana live"],
        ["search_document: Ana lives in Lisbon"],
    ]
    expected = SERVED.embed(["search_query: where does Ana live"], EmbedMode.QUERY)
    assert np.allclose(query, expected, atol=1e-6)
    assert not np.allclose(document, SERVED.embed(["Ana lives in Lisbon"], EmbedMode.DOCUMENT))


def test_configured_prefixes_win_and_another_model_gets_none(server: OllamaProtocolServer) -> None:
    server.embedding_model = "mxbai-embed-large"
    build_embedder(ollama_config(server, model="mxbai-embed-large")).embed(["a"], EmbedMode.QUERY)
    mine = ollama_config(server, model="mxbai-embed-large", query_prefix="Represent: ")
    build_embedder(mine).embed(["a"], EmbedMode.QUERY)
    build_embedder(mine).embed(["a"], EmbedMode.DOCUMENT)
    assert [r["input"] for r in server.requests] == [["a"], ["Represent: a"], ["a"]]


def test_prefixes_apply_to_a_local_embedder_too() -> None:
    plain = build_embedder(EmbedderConfig(kind="hash", dim=64))
    prefixed = build_embedder(EmbedderConfig(kind="hash", dim=64, query_prefix="q: "))
    assert prefixed.name == plain.name  # the same model: the same vector space
    assert np.allclose(
        prefixed.embed(["a cat"], EmbedMode.QUERY), plain.embed(["q: a cat"], EmbedMode.QUERY)
    )
    assert np.allclose(
        prefixed.embed(["a cat"], EmbedMode.DOCUMENT), plain.embed(["a cat"], EmbedMode.DOCUMENT)
    )


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_dimension_other_than_the_configured_is_a_typed_error_naming_both(
    kind: str, server: OllamaProtocolServer
) -> None:
    make, _ = KINDS[kind]
    with pytest.raises(EmbedderDimensionError, match=r"returned 768-d vectors.*dim is 384") as e:
        build_embedder(make(server, dim=384)).embed(["x"], EmbedMode.QUERY)
    assert (e.value.expected, e.value.got) == (384, 768)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_unreachable_server_is_unavailable_after_its_retries(
    kind: str, server: OllamaProtocolServer
) -> None:
    make, _ = KINDS[kind]
    config = make(server, retries=1)
    server.stop()
    with pytest.raises(EmbedderUnavailableError, match=r"after 2 tries"):
        build_embedder(config).embed(["x"], EmbedMode.QUERY)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_transient_failures_are_retried_and_a_refusal_is_not(
    kind: str, server: OllamaProtocolServer
) -> None:
    make, path = KINDS[kind]
    embedder = build_embedder(make(server, retries=2))
    server.fail_embeds = [503, 429]
    assert embedder.embed(["x"], EmbedMode.QUERY).shape == (1, DIM)
    assert len([r for r in server.requests if r["path"] == path]) == 3
    server.fail_embeds = [503, 503, 503]
    with pytest.raises(EmbedderUnavailableError, match="after 3 tries"):
        embedder.embed(["x"], EmbedMode.QUERY)
    server.requests.clear()
    server.fail_embeds = [400]
    with pytest.raises(EmbedderError, match="HTTP 400") as refused:
        embedder.embed(["x"], EmbedMode.QUERY)
    assert not isinstance(refused.value, EmbedderUnavailableError)
    assert len(server.requests) == 1  # not retried


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_unknown_model_is_a_typed_error(kind: str, server: OllamaProtocolServer) -> None:
    make, _ = KINDS[kind]
    with pytest.raises(EmbedderError, match=r"not found.*HTTP 404"):
        build_embedder(make(server, model="no-such-model")).embed(["x"], EmbedMode.QUERY)


def test_openai_key_comes_from_the_variable_the_configuration_names(
    server: OllamaProtocolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TM_TEST_EMBED_KEY", raising=False)
    config = openai_config(server, api_key_env="TM_TEST_EMBED_KEY")
    with pytest.raises(ConfigError, match="TM_TEST_EMBED_KEY, which is unset"):
        build_embedder(config)
    monkeypatch.setenv("TM_TEST_EMBED_KEY", "sk-test")
    assert build_embedder(config).embed(["x"], EmbedMode.QUERY).shape == (1, DIM)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_memory_adds_and_searches_through_the_served_embedder(
    kind: str, server: OllamaProtocolServer
) -> None:
    make, path = KINDS[kind]
    config = TiermemConfig.for_tests().model_copy(update={"embedder": make(server)})
    with Memory(config) as memory:
        memory.add(chat(("user", "My sister Ana lives in Lisbon.")), user_id="maya")
        memory.add(chat(("user", "I adopted a greyhound called Comet.")), user_id="maya")
        hits = memory.search("where does my sister live", user_id="maya", k=1)
    assert hits[0].entry.text == "Ana: My sister Ana lives in Lisbon."
    sent = [text for r in server.requests if r["path"] == path for text in r["input"]]
    assert any(t.startswith("search_document: ") and "Lisbon" in t for t in sent)
    assert any(t.startswith("search_query: ") and "sister" in t for t in sent)


# -- configuration: one class per kind --------------------------------------------------------
def test_each_kind_has_its_class() -> None:
    assert EMBEDDERS.get("ollama").config is OllamaEmbedderConfig
    assert EMBEDDERS.get("openai").config is OpenAIEmbedderConfig
    assert EMBEDDERS.get("llamacpp").config is LlamaCppEmbedderConfig
    loaded = TiermemConfig.model_validate({"embedder": {"kind": "ollama"}}).embedder
    assert isinstance(loaded, OllamaEmbedderConfig)
    assert (loaded.kind, loaded.model, loaded.dim) == ("ollama", "nomic-embed-text", 768)
    with pytest.raises(ValidationError, match="is configured by OllamaEmbedderConfig"):
        EmbedderConfig(kind="ollama")


def test_a_field_another_kind_has_is_refused_by_name() -> None:
    with pytest.raises(ValidationError, match=r"ollama.base_url\n  Extra inputs"):
        TiermemConfig.model_validate({"embedder": {"kind": "ollama", "base_url": "http://x"}})
    with pytest.raises(ValidationError, match=r"openai.base_url\n  Field required"):
        TiermemConfig.model_validate({"embedder": {"kind": "openai", "model": "m", "dim": 8}})
    with pytest.raises(ValidationError, match="picks the device"):
        TiermemConfig.model_validate({"embedder": {"kind": "ollama", "device": "cuda"}})


def test_the_old_name_provider_still_loads_with_a_warning(tmp_path: Path) -> None:
    old = tmp_path / "old.toml"
    old.write_text('[embedder]\nprovider = "hash"\nmodel = "hash-384"\n')
    with pytest.warns(DeprecatedSettingWarning, match="embedder.provider is now embedder.kind"):
        loaded = load_config(old, {})
    assert type(loaded.embedder) is EmbedderConfig
    assert loaded.embedder.kind == "hash"
    with pytest.warns(DeprecatedSettingWarning):
        assert loaded.embedder.provider == "hash"  # read in code: the same warning
    with pytest.warns(DeprecatedSettingWarning), pytest.raises(ValidationError, match="differ"):
        EmbedderConfig.model_validate({"kind": "ollama", "provider": "hash"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name warns of nothing
        assert load_config(None, {"TIERMEM_EMBEDDER__KIND": "hash"}).embedder.kind == "hash"
    new = tmp_path / "new.toml"
    new.write_text('[embedder]\nkind = "ollama"\nhost = "http://ollama:11434"\n')
    served = load_config(new, {"TIERMEM_EMBEDDER__TIMEOUT_S": "5"})
    assert isinstance(served.embedder, OllamaEmbedderConfig)
    assert (served.embedder.host, served.embedder.timeout_s) == ("http://ollama:11434", 5.0)
    switched = load_config(None, {"TIERMEM_EMBEDDER__KIND": "ollama"})
    assert isinstance(switched.embedder, OllamaEmbedderConfig)  # a new kind: its defaults
    assert switched.embedder.model == "nomic-embed-text"
    over_file = load_config(old, {"TIERMEM_EMBEDDER__KIND": "sentence-transformers"})
    assert over_file.embedder.kind == "sentence-transformers"  # the environment wins


def test_a_served_configuration_survives_a_merge() -> None:
    config = TiermemConfig.model_validate(
        {"embedder": {"kind": "openai", "model": "m", "dim": 8, "base_url": "http://h/v1"}}
    )
    merged = merge_overrides(config, {"default_k": 3, "embedder": {"batch_size": 4}})
    assert isinstance(merged.embedder, OpenAIEmbedderConfig)
    assert (merged.embedder.model, merged.embedder.batch_size) == ("m", 4)
