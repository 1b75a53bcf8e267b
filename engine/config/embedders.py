"""The embedders' configurations, one class per kind that has fields of its own, and
``Embedding``, their union discriminated on the kind (``kind``; the old name ``provider`` is
still read, with a ``DeprecatedSettingWarning``, until the next release)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import (
    Discriminator,
    Field,
    SecretStr,
    Tag,
    TypeAdapter,
    model_validator,
)
from tiermem.config.section import DeprecatedSettingWarning, Section, validated

_KIND_PATTERN = r"^[a-z][a-z0-9_.-]{0,63}$"
PROVIDER_MOVED = (
    "embedder.provider is now embedder.kind: write kind (provider is read until tiermem 0.2)"
)


class EmbedderConfig(Section):
    """Which embedder turns text into vectors: the fields every embedder kind has.
    ``kind`` names an entry of ``tiermem.embedding.registry`` (``provider``, its old name, is
    read too, with a ``DeprecatedSettingWarning``).
    This class configures the in-process kinds ``sentence-transformers`` (the default,
    all-MiniLM-L6-v2 from its PyPI package) and ``hash`` (model-free, for tests), and any
    kind registered at run time. The kinds that load or reach a model of their own have their
    own class, so a field that a kind does not have is refused by name: ``ollama``
    (``OllamaEmbedderConfig``), ``openai`` (``OpenAIEmbedderConfig``) and ``llamacpp``
    (``LlamaCppEmbedderConfig``). ``Embedding`` is their union, discriminated on the kind.

    ``query_prefix`` and ``document_prefix`` are put before every text embedded as a query or
    as a document (``EmbedMode``). Unset, a model known to want them gets its own
    (nomic-embed-text: ``search_query: `` and ``search_document: ``), any other none; see
    ``tiermem.embedding.served.prefixes_for``.

    >>> EmbedderConfig(kind="hash").kind
    'hash'
    >>> embedder_config(kind="ollama").model, embedder_config(kind="ollama").dim
    ('nomic-embed-text', 768)
    """

    kind: str = Field(default="sentence-transformers", pattern=_KIND_PATTERN)
    model: str = "all-MiniLM-L6-v2"
    dim: int = Field(default=384, gt=0)
    batch_size: int = Field(default=64, gt=0)
    device: str = "cpu"
    query_prefix: str | None = None
    document_prefix: str | None = None

    @property
    def provider(self) -> str:
        """The old name of ``kind``; read it as ``kind``."""
        warnings.warn(PROVIDER_MOVED, DeprecatedSettingWarning, stacklevel=2)
        return self.kind

    @model_validator(mode="before")
    @classmethod
    def _one_kind(cls, data: Any) -> Any:
        """``provider`` is ``kind``'s old name: read, with a warning; both may be given only
        alike (an old file's ``provider`` merged over a dumped ``kind`` gives both)."""
        if not (isinstance(data, dict) and "provider" in data):
            return data
        warnings.warn(PROVIDER_MOVED, DeprecatedSettingWarning, stacklevel=2)
        if "kind" in data and data["kind"] != data["provider"]:
            raise ValueError(
                f"embedder kind {data['kind']!r} and provider {data['provider']!r} differ:"
                " they are one field (provider is its old name), give kind"
            )
        return {**{k: v for k, v in data.items() if k != "provider"}, "kind": data["provider"]}

    @model_validator(mode="after")
    def _kinds_with_a_class_are_configured_by_it(self) -> EmbedderConfig:
        own = EMBEDDER_CLASSES.get(self.kind, EmbedderConfig)
        if type(self) is EmbedderConfig and own is not EmbedderConfig:
            raise ValueError(f"embedder kind {self.kind!r} is configured by {own.__name__}")
        return self


class ServedEmbedderConfig(EmbedderConfig):
    """What the kinds that call an embedding server have: how long a request may take, and
    how often a transient failure (no connection, a timeout, HTTP 429 or 5xx) is retried,
    waiting ``retry_backoff_s``, then twice that, and so on. The server owns the device."""

    timeout_s: float = Field(default=30.0, gt=0)
    retries: int = Field(default=2, ge=0, le=10)
    retry_backoff_s: float = Field(default=0.5, ge=0)

    @model_validator(mode="after")
    def _no_device(self) -> ServedEmbedderConfig:
        if self.device != "cpu":  # the default, which a dumped configuration carries
            raise ValueError(
                f"embedder kind {self.kind!r} runs on its server, which picks the device;"
                " remove embedder.device"
            )
        return self


class OllamaEmbedderConfig(ServedEmbedderConfig):
    """An embedding model that an Ollama server serves, through ``/api/embed`` (the official
    ``ollama`` client); ``model`` is its tag. The default is nomic-embed-text (768-d)."""

    kind: Literal["ollama"] = Field(default="ollama")
    model: str = Field(default="nomic-embed-text", min_length=1)
    dim: int = Field(default=768, gt=0)
    batch_size: int = Field(default=32, gt=0)
    host: str = Field(default="http://127.0.0.1:11434", min_length=1)
    keep_alive: str = "30m"


class OpenAIEmbedderConfig(ServedEmbedderConfig):
    """Any OpenAI-compatible ``/v1/embeddings`` (OpenAI, vLLM, llama.cpp's server, Ollama's
    ``/v1``, through the official ``openai`` client). It has no default model, dimension or
    address, so all three are named. The key is ``api_key``, or else the environment variable
    that ``api_key_env`` names, read when the embedder is built; a local server needs none."""

    kind: Literal["openai"] = Field(default="openai")
    model: str = Field(min_length=1)
    dim: int = Field(gt=0)
    base_url: str = Field(min_length=1)
    api_key: SecretStr | None = None
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")


class LlamaCppEmbedderConfig(EmbedderConfig):
    """A GGUF embedding model in process through llama-cpp-python. ``model`` is a model
    alias (``tiermem models list``, installed under ``models_dir``) or a GGUF path; ``dim`` is
    checked against the model's own when it loads. ``pooling``: ``model`` takes what the GGUF
    declares (embedding models declare one); ``mean``, ``cls`` or ``last`` override it.
    ``device``: ``cpu``, or anything else to offload every layer to a GPU build's device."""

    kind: Literal["llamacpp"] = Field(default="llamacpp")
    model: str = Field(min_length=1)
    dim: int = Field(gt=0)
    n_ctx: int = Field(default=2048, ge=64)
    n_threads: int | None = Field(default=None, gt=0)
    pooling: Literal["model", "mean", "cls", "last"] = "model"
    models_dir: Path = Path("~/.cache/tiermem/models")


EMBEDDER_CLASSES: Final[Mapping[str, type[EmbedderConfig]]] = {
    "hash": EmbedderConfig,
    "sentence-transformers": EmbedderConfig,
    "ollama": OllamaEmbedderConfig,
    "openai": OpenAIEmbedderConfig,
    "llamacpp": LlamaCppEmbedderConfig,
}
_LOCAL_KIND = "local"  # the union's tag for the kinds that EmbedderConfig itself configures


def _embedder_tag(data: Any) -> str:
    if isinstance(data, dict):
        kind = data.get("kind", data.get("provider", "sentence-transformers"))
    else:
        kind = getattr(data, "kind", None)
    own = EMBEDDER_CLASSES.get(kind) if isinstance(kind, str) else None
    return kind if isinstance(kind, str) and own not in (None, EmbedderConfig) else _LOCAL_KIND


Embedding = Annotated[
    Annotated[OllamaEmbedderConfig, Tag("ollama")]
    | Annotated[OpenAIEmbedderConfig, Tag("openai")]
    | Annotated[LlamaCppEmbedderConfig, Tag("llamacpp")]
    | Annotated[EmbedderConfig, Tag(_LOCAL_KIND)],
    Discriminator(_embedder_tag),
]
"""An embedder's configuration, by kind (``kind``, or its old name ``provider``; missing:
``sentence-transformers``)."""
_EMBEDDING: TypeAdapter[EmbedderConfig] = TypeAdapter(Embedding)


def embedder_config(**fields: Any) -> EmbedderConfig:
    """The configuration of embedder ``fields["kind"]``, in its own class.

    >>> type(embedder_config(kind="openai", model="m", dim=8, base_url="http://h/v1")).__name__
    'OpenAIEmbedderConfig'
    >>> embedder_config(kind="ollama", device="cuda")
    Traceback (most recent call last):
    tiermem.errors.ConfigError: ...runs on its server, which picks the device...
    """
    return validated(_EMBEDDING, fields)


__all__ = [
    "EMBEDDER_CLASSES",
    "EmbedderConfig",
    "Embedding",
    "LlamaCppEmbedderConfig",
    "OllamaEmbedderConfig",
    "OpenAIEmbedderConfig",
    "ServedEmbedderConfig",
    "embedder_config",
]
