"""Typed configuration. The library takes these objects; files and environment variables are
read only at the edge (``tiermem.settings``, used by the CLI and the service).

>>> cfg = TiermemConfig.for_data_dir("/tmp/tm-doc")
>>> cfg.mtm.kind, cfg.mtm.location, cfg.embedder.provider
('qdrant', 'path', 'sentence-transformers')
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SecretStr,
    Tag,
    TypeAdapter,
    model_validator,
)
from tiermem.errors import ConfigError


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


_KIND = AliasChoices("provider", "kind")  # an embedder's kind is read under either name
_KIND_PATTERN = r"^[a-z][a-z0-9_.-]{0,63}$"


class EmbedderConfig(_Section):
    """Which embedder turns text into vectors: the fields every embedder kind has.
    ``provider`` (read as ``kind`` too) names an entry of ``tiermem.embedding.registry``.
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

    >>> EmbedderConfig(provider="hash").kind
    'hash'
    >>> embedder_config(kind="ollama").model, embedder_config(kind="ollama").dim
    ('nomic-embed-text', 768)
    """

    provider: str = Field(
        default="sentence-transformers", pattern=_KIND_PATTERN, validation_alias=_KIND
    )
    model: str = "all-MiniLM-L6-v2"
    dim: int = Field(default=384, gt=0)
    batch_size: int = Field(default=64, gt=0)
    device: str = "cpu"
    query_prefix: str | None = None
    document_prefix: str | None = None

    @property
    def kind(self) -> str:
        """The embedder's kind: ``provider``, by the name the other families use."""
        return self.provider

    @model_validator(mode="before")
    @classmethod
    def _one_kind(cls, data: Any) -> Any:
        """``kind`` and ``provider`` are one field: both may be given only alike (a file's
        ``kind`` merged over a dumped ``provider`` gives both)."""
        if isinstance(data, dict) and "kind" in data and "provider" in data:
            if data["kind"] != data["provider"]:
                raise ValueError(
                    f"embedder kind {data['kind']!r} and provider {data['provider']!r} differ:"
                    " they are one field, give one"
                )
            return {k: v for k, v in data.items() if k != "kind"}
        return data

    @model_validator(mode="after")
    def _kinds_with_a_class_are_configured_by_it(self) -> EmbedderConfig:
        own = EMBEDDER_CLASSES.get(self.provider, EmbedderConfig)
        if type(self) is EmbedderConfig and own is not EmbedderConfig:
            raise ValueError(f"embedder kind {self.provider!r} is configured by {own.__name__}")
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
                f"embedder kind {self.provider!r} runs on its server, which picks the device;"
                " remove embedder.device"
            )
        return self


class OllamaEmbedderConfig(ServedEmbedderConfig):
    """An embedding model that an Ollama server serves, through ``/api/embed`` (the official
    ``ollama`` client); ``model`` is its tag. The default is nomic-embed-text (768-d)."""

    provider: Literal["ollama"] = Field(default="ollama", validation_alias=_KIND)
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

    provider: Literal["openai"] = Field(default="openai", validation_alias=_KIND)
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

    provider: Literal["llamacpp"] = Field(default="llamacpp", validation_alias=_KIND)
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
        kind = data.get("provider", data.get("kind", "sentence-transformers"))
    else:
        kind = getattr(data, "provider", None)
    own = EMBEDDER_CLASSES.get(kind) if isinstance(kind, str) else None
    return kind if isinstance(kind, str) and own not in (None, EmbedderConfig) else _LOCAL_KIND


Embedding = Annotated[
    Annotated[OllamaEmbedderConfig, Tag("ollama")]
    | Annotated[OpenAIEmbedderConfig, Tag("openai")]
    | Annotated[LlamaCppEmbedderConfig, Tag("llamacpp")]
    | Annotated[EmbedderConfig, Tag(_LOCAL_KIND)],
    Discriminator(_embedder_tag),
]
"""An embedder's configuration, by kind (``provider`` or ``kind``; missing:
``sentence-transformers``)."""
_EMBEDDING: TypeAdapter[EmbedderConfig] = TypeAdapter(Embedding)


def embedder_config(**fields: Any) -> EmbedderConfig:
    """The configuration of embedder ``fields["provider"]`` (or ``fields["kind"]``), in its
    own class.

    >>> type(embedder_config(kind="openai", model="m", dim=8, base_url="http://h/v1")).__name__
    'OpenAIEmbedderConfig'
    >>> embedder_config(kind="ollama", device="cuda")
    Traceback (most recent call last):
    tiermem.errors.ConfigError: ...runs on its server, which picks the device...
    """
    try:
        return _EMBEDDING.validate_python(fields)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


class MTMConfig(_Section):
    """Per-user episodic memory: what every store kind has. ``kind`` picks the store (a
    ``tiermem.stores.factory.STORES`` entry): ``qdrant`` (``QdrantConfig``, the default; where
    it lives is its ``location``) or ``reference`` (``ReferenceStoreConfig``, the exact
    in-memory oracle, for tests and baselines). ``MTM`` is their union, on ``kind``."""

    kind: str
    collection_prefix: str = Field(default="tiermem_mtm_", pattern=r"^[a-z][a-z0-9_]{0,31}$")
    capacity: int = Field(default=10_000, gt=0)


class QdrantConfig(MTMConfig):
    """Qdrant through qdrant-client. ``location``: ``path`` (embedded, on disk under the data
    directory, the default), ``memory`` (in process, gone on close) or ``url`` (a server)."""

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


class ReferenceStoreConfig(MTMConfig):
    """The exact in-memory store that the congruence tests hold Qdrant to."""

    kind: Literal["reference"] = "reference"


def _mtm_tag(data: Any) -> str | None:
    kind = data.get("kind", "qdrant") if isinstance(data, dict) else getattr(data, "kind", None)
    return kind if isinstance(kind, str) else None


MTM = Annotated[
    Annotated[QdrantConfig, Tag("qdrant")] | Annotated[ReferenceStoreConfig, Tag("reference")],
    Discriminator(_mtm_tag),
]
"""An MTM store's configuration, by ``kind`` (a missing kind is ``qdrant``)."""


class STMConfig(_Section):
    """The working-memory window kept per (user, session)."""

    max_tokens: int = Field(default=1024, gt=0)
    max_turns: int = Field(default=32, gt=0)


class BackendConfig(_Section):
    """How to reach a model: the fields every backend kind has. ``kind`` names a backend in
    ``tiermem.slm.registry``; each built-in kind has its own class below (``Backend`` is their
    union, discriminated on ``kind``), so a field that a kind does not have is refused by name.
    A kind registered at run time (a test's fake) is configured by this class itself, and
    must name its model. ``none`` (``NoModelConfig``) means no model: the model-free stages
    run instead."""

    kind: str = Field(pattern=r"^[a-z][a-z0-9_.-]{0,63}$")
    model: str = Field(min_length=1)
    request_timeout_s: float = Field(default=120.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _empty_model_is_the_default(cls, data: Any) -> Any:
        """An empty ``model`` means the kind's default (``merge_overrides`` leaves one when
        only the kind changes)."""
        if isinstance(data, dict) and data.get("model") == "":
            return {k: v for k, v in data.items() if k != "model"}
        return data

    @model_validator(mode="after")
    def _builtin_kinds_have_their_class(self) -> BackendConfig:
        if type(self) is BackendConfig and self.kind in BUILTIN_BACKENDS:
            own = BUILTIN_BACKENDS[self.kind].__name__
            raise ValueError(f"slm backend kind {self.kind!r} is configured by {own}")
        return self


class NoModelConfig(BackendConfig):
    """No model: every role runs its model-free stage."""

    kind: Literal["none"] = "none"
    model: Literal[""] = ""


class LlamaCppConfig(BackendConfig):
    """A GGUF model in process through llama-cpp-python. ``model`` is an alias (``smollm2``,
    ``qwen0.5b``, ``qwen1.5b``) or a GGUF path."""

    kind: Literal["llamacpp"] = "llamacpp"
    model: str = Field(default="qwen0.5b", min_length=1)
    n_ctx: int = Field(default=4096, ge=512)
    n_threads: int | None = Field(default=None, gt=0)
    # Load a build with llama.cpp's AMX kernels. Off: they died with SIGILL on this project's
    # machines even where the kernel grants AMX; turn on only where
    # `tiermem doctor --allow-amx` passes.
    allow_amx: bool = False
    # A GGUF LoRA adapter applied on load (`tiermem train selector` exports one). An Ollama
    # model takes its adapter in its Modelfile (ADAPTER), a vLLM server in --lora-modules
    # (then `model` names the adapter): neither kind has this field.
    lora_path: Path | None = None
    lora_scale: float = Field(default=1.0, ge=0)


class OllamaConfig(BackendConfig):
    """A model an Ollama server serves; ``model`` is its tag."""

    kind: Literal["ollama"] = "ollama"
    model: str = Field(default="llama3.2:1b-instruct-q4_K_M", min_length=1)
    host: str = "http://127.0.0.1:11434"
    keep_alive: str = "30m"


class OpenAIConfig(BackendConfig):
    """Any OpenAI-compatible server (vLLM, llama-server, a hosted API): it has no default
    model or address, so both are named."""

    kind: Literal["openai"] = "openai"
    model: str = Field(min_length=1)
    base_url: str = Field(min_length=1)
    api_key: str | None = None
    response_format: Literal["json_schema", "json_object_schema"] = "json_schema"


BUILTIN_BACKENDS: Final[Mapping[str, type[BackendConfig]]] = {
    "none": NoModelConfig,
    "llamacpp": LlamaCppConfig,
    "ollama": OllamaConfig,
    "openai": OpenAIConfig,
}
_RUNTIME_KIND = "registered"  # the union's tag for a kind registered at run time


def _backend_tag(data: Any) -> str:
    kind = data.get("kind", "none") if isinstance(data, dict) else getattr(data, "kind", None)
    return kind if isinstance(kind, str) and kind in BUILTIN_BACKENDS else _RUNTIME_KIND


Backend = Annotated[
    Annotated[NoModelConfig, Tag("none")]
    | Annotated[LlamaCppConfig, Tag("llamacpp")]
    | Annotated[OllamaConfig, Tag("ollama")]
    | Annotated[OpenAIConfig, Tag("openai")]
    | Annotated[BackendConfig, Tag(_RUNTIME_KIND)],
    Discriminator(_backend_tag),
]
"""A backend's configuration, by ``kind`` (a missing kind is ``none``)."""
_BACKEND: TypeAdapter[BackendConfig] = TypeAdapter(Backend)


def backend_config(**fields: Any) -> BackendConfig:
    """The configuration of backend ``fields["kind"]``, in its own class.

    >>> backend_config(kind="ollama").model
    'llama3.2:1b-instruct-q4_K_M'
    >>> backend_config(kind="ollama", lora_path="a.gguf")
    Traceback (most recent call last):
    tiermem.errors.ConfigError: ...lora_path...Extra inputs are not permitted...
    """
    try:
        return _BACKEND.validate_python(fields)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


class RoleConfig(_Section):
    """One SLM role: on or off, its backend (the shared one if unset) and its budgets."""

    enabled: bool = True
    backend: Backend | None = None
    timeout_s: float = Field(default=30.0, gt=0)
    temperature: float = Field(default=0.0, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0)


ONLINE_ROLES = ("controller", "selector", "writer")  # SLMConfig's role sections


class SLMConfig(_Section):
    """The online small-model roles. With ``backend.kind = "none"`` every role is model-free:
    the plain query, first-stage order, one verbatim entry per turn that is not small talk."""

    backend: Backend = NoModelConfig()
    controller: RoleConfig = RoleConfig()
    selector: RoleConfig = RoleConfig()
    writer: RoleConfig = RoleConfig(timeout_s=60.0)
    candidate_multiplier: int = Field(default=2, ge=1, le=8)
    selector_min_keep: int = Field(default=1, ge=0)
    # The selector's method: ``listwise`` (one call names the supporting candidates) or
    # ``pointwise`` (each candidate's P(yes) from the next token, fused with its first-stage
    # rank as ``pointwise_weight * p + (1 - pointwise_weight) * prior(rank)``; the candidates
    # whose fused score reaches ``pointwise_threshold`` are kept, at most k; 0 keeps k). A
    # weight up to 1/(candidate_multiplier + 1) cannot let an inverted model push the
    # first-stage top out of the k kept.
    # ``cross-encoder``: a fine-tuned MiniLM scores the pool in one call on a CPU, fused the
    # same way (``pointwise_weight``), needing no small model: ``cross_encoder`` names its
    # directory (``tiermem train selector --arch cross-encoder``). ``cross_encoder_threshold``:
    # 0 keeps k, reordered (the default: on LoCoMo's test conversations the calibrated cut
    # lost 2.0 / 8.2 points at 300 / 600 tokens, k kept gained 2.5 / 1.6); ``None``, the
    # threshold it was calibrated with on the tune split (an adaptive K, fewer tokens).
    selector_mode: Literal["listwise", "pointwise", "cross-encoder"] = "listwise"
    pointwise_weight: float = Field(default=0.3, ge=0, le=1)
    pointwise_threshold: float = Field(default=0.0, ge=0, le=1)
    cross_encoder: Path | None = None
    cross_encoder_threshold: float | None = Field(default=0.0, ge=0, le=1)
    # The dtype the cross-encoder runs in. ``auto``: bfloat16 on a CPU that computes it in
    # hardware (AVX-512 BF16 or AMX), float32 elsewhere (and on a GPU).
    cross_encoder_precision: Literal["auto", "float32", "bfloat16"] = "auto"
    merge_threshold: float = Field(default=0.92, gt=0, le=1)
    # A writer's "replaces" is accepted only this close to the entry it would supersede
    # (all-MiniLM-L6-v2: real updates measured 0.66-0.80, unrelated facts 0.26-0.53).
    supersede_min_similarity: float = Field(default=0.6, ge=0, le=1)
    writer_max_turns: int = Field(default=8, ge=1, le=8)
    # Keep every non-small-talk turn verbatim beside the writer's entries, and the exchanges
    # the model-free path writes (since 2026-12-06; turns alone before). Measured on LoCoMo
    # conversation 1 with Qwen2.5-Coder-0.5B: writer entries alone delivered 5.4% of the gold
    # evidence at k=10, verbatim turns 53.8%; the writer's facts must add, not replace.
    writer_keep_turns: bool = True
    # Apply the writer's update decisions ("replaces") as supersedes: the older entry leaves
    # default searches. Off by default: a wrong supersede hides a fact that is still true,
    # and the small local writers are not precise: qwen0.5b's supersedes were 1 right in 7
    # on ``tiermem bench writer`` and 0 in 12 on ``bench updates``, and asked whether a newer
    # message makes an older one untrue, neither qwen0.5b nor qwen1.5b told real changes
    # from look-alikes (AUC 0.58 and 0.59). Off, the writer's entries are still written and
    # its "replaces" is counted (``replaces_off``); newer statements reach the context as
    # later statements (``delivery.later``). Turn it on for a writer measured precise on
    # ``bench updates``.
    writer_supersedes: bool = False
    models_dir: Path = Path("~/.cache/tiermem/models")

    @model_validator(mode="after")
    def _cross_encoder_has_its_model(self) -> SLMConfig:
        if self.selector_mode == "cross-encoder" and self.cross_encoder is None:
            raise ValueError(
                "slm.selector_mode='cross-encoder' needs slm.cross_encoder, the model directory "
                "that `tiermem train selector --arch cross-encoder` wrote"
            )
        return self


class ConsolidationConfig(_Section):
    """The offline job that turns MTM batches into LTM knowledge.

    ``backend`` is the large model (any OpenAI-compatible endpoint in production; the
    embedded default runs Qwen2.5-Coder-1.5B in-process). ``interval_minutes = 0`` turns the
    background scheduler off (``consolidate_now()`` still works)."""

    backend: Backend = LlamaCppConfig(model="qwen1.5b", n_threads=1)
    timeout_s: float = Field(default=240.0, gt=0)
    max_tokens: int = Field(default=700, gt=0)
    batch_size: int = Field(default=48, ge=1)  # entries per user per run
    chunk_size: int = Field(default=6, ge=1, le=16)  # entries per model call
    anchors: int = Field(default=6, ge=0, le=16)  # nearest nodes shown to the model
    interval_minutes: float = Field(default=30.0, ge=0)
    trigger_turns: int = Field(default=12, ge=1)  # a run is due after this many new turns
    capacity_pressure: float = Field(default=0.9, gt=0, le=1)  # of MTM capacity
    retry_s: float = Field(default=60.0, gt=0)
    misfire_grace_s: int = Field(default=300, ge=1)


class LTMConfig(_Section):
    """Cross-user knowledge graph, written by offline consolidation, read beside MTM.

    ``secret`` keys the provenance hashes (hex, >= 16 bytes); unset, one is generated and
    kept in ``path/secret.key`` (or per process when ``path`` is unset)."""

    enabled: bool = False
    path: Path | None = None
    secret: SecretStr | None = None
    merge_threshold: float = Field(default=0.9, gt=0, le=1)  # cosine: the same node
    evidence_gain: float = Field(default=0.5, gt=0, lt=1)
    half_life_days: float = Field(default=60.0, gt=0)
    prune_below: float = Field(default=0.1, ge=0, lt=1)
    search_seeds: int = Field(default=4, ge=1)
    search_hops: int = Field(default=1, ge=0, le=3)
    search_min_similarity: float = Field(default=0.35, ge=-1, le=1)
    # LTM facts may take at most this share of the k memories a search returns.
    max_share: float = Field(default=0.3, ge=0, le=1)
    consolidation: ConsolidationConfig = ConsolidationConfig()


class GeneratorConfig(_Section):
    """What writes ``answer()``'s text. ``extractive`` quotes the memories it used; ``model``
    asks a model (its own backend, or the SLM backend if unset), falling back to extractive."""

    kind: Literal["extractive", "model"] = "extractive"
    backend: Backend | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    max_memories: int = Field(default=5, gt=0)
    # A context shares no word with the question and no hit is this close (dense cosine):
    # memory holds nothing about it (``tiermem.generator.supports``; all-MiniLM-L6-v2 scale).
    support_min_similarity: float = Field(default=0.35, ge=-1, le=1)


class DeliveryConfig(_Section):
    """How ``context()`` and ``answer()`` spend a token budget (``tiermem.policy
    .DeliveryPolicy``): hits retrieved per token of budget, their cap, the budget of
    ``answer()``, and the neighbour shares of expansion (``tiermem.policy.Expansion``)."""

    tokens_per_hit: int = Field(default=25, gt=0)  # about one conversational turn
    max_hits: int = Field(default=200, gt=0)
    answer_budget_tokens: int = Field(default=1200, gt=0)
    reply: float = Field(default=0.5, ge=0, le=1)
    previous: float = Field(default=0.3, ge=0, le=1)
    burst: float = Field(default=0.8, ge=0, le=1)
    decay: float = Field(default=0.7, ge=0, le=1)
    reach: int = Field(default=4, ge=0)
    member: float = Field(default=0.9, ge=0, le=1)
    piece: float = Field(default=0.5, ge=0, le=1)
    distinct: bool = True
    cut: float = Field(default=0.0, ge=0, le=1)
    fall_off: float = Field(default=0.0, ge=0, le=1)
    later: float = Field(default=0.05, ge=0, le=1)  # in context(); answer(): answer_later
    answer_later: float = Field(default=0.6, ge=0, le=1)
    later_hits: int = Field(default=4, ge=0)
    later_per_hit: int = Field(default=2, ge=0)
    later_similarity: float = Field(default=0.5, ge=-1, le=1)
    later_max_tokens: int = Field(default=80, ge=0)
    later_retrieved: bool = True
    neighbour_tokens: int = Field(default=100, ge=0)  # a longer neighbour is worth less per token
    long_tokens: int = Field(default=400, ge=0)  # a longer unit is worth less per token
    long_share: float = Field(default=0.25, ge=0, le=1)  # ... and one past this share of the budget


class JournalConfig(_Section):
    """The SQLite journal: the audit log and the source turns that MTM entries point to.
    ``path=None`` keeps it in memory (tests)."""

    path: Path | None = None


DEFAULT_DATA_DIR = Path("~/.local/share/tiermem")
"""Where ``Memory.from_defaults()`` and the CLI keep the embedded default's files."""


class TiermemConfig(_Section):
    """The whole configuration of one ``Memory``."""

    data_dir: Path | None = None
    embedder: Embedding = EmbedderConfig()
    mtm: MTM = QdrantConfig(location="memory")
    stm: STMConfig = STMConfig()
    slm: SLMConfig = SLMConfig()
    ltm: LTMConfig = LTMConfig()
    generator: GeneratorConfig = GeneratorConfig()
    journal: JournalConfig = JournalConfig()
    delivery: DeliveryConfig = DeliveryConfig()
    default_k: int = Field(default=5, gt=0)

    @classmethod
    def for_data_dir(cls, data_dir: str | Path) -> TiermemConfig:
        """The embedded default: Qdrant and the audit log on disk under ``data_dir``."""
        root = Path(data_dir).expanduser()
        return cls(
            data_dir=root,
            mtm=QdrantConfig(location="path", path=root / "qdrant"),
            journal=JournalConfig(path=root / "journal.sqlite3"),
            ltm=LTMConfig(path=root / "ltm"),
        )

    @classmethod
    def for_tests(cls) -> TiermemConfig:
        """Everything in memory with the deterministic hash embedder: no files, no model."""
        return cls(embedder=EmbedderConfig(provider="hash", model="hash-384"))


def merge_overrides(config: TiermemConfig, overrides: dict[str, object]) -> TiermemConfig:
    """Return ``config`` with nested ``overrides`` applied and validated again."""
    data = config.model_dump()
    _deep_update(data, overrides)
    try:
        return TiermemConfig.model_validate(data)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def _deep_update(target: dict[str, object], updates: dict[str, object]) -> None:
    """Merge ``updates`` into ``target``. A section whose ``kind`` changes is replaced: it
    starts from the new kind's defaults, not the fields of the old kind."""
    for key, value in updates.items():
        current = target.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            kind = _section_kind(current)
            new_kind = _section_kind(value)
            if new_kind is None or new_kind == kind:
                _deep_update(current, value)
                continue
        target[key] = value


def _section_kind(section: dict[str, object]) -> object:
    """A section's kind: ``kind``, or ``provider`` (the embedder's name for it)."""
    return section.get("kind", section.get("provider"))
