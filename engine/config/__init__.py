"""Typed configuration. The library takes these objects; files and environment variables are
read only at the edge (``tiermem.settings``, used by the CLI and the service). The three
families that come in kinds, each a union discriminated on its kind, have a module of their
own: ``embedders``, ``stores`` (MTM) and ``backends`` (models); every class is imported from
here.

>>> cfg = TiermemConfig.for_data_dir("/tmp/tm-doc-new")
>>> cfg.mtm.kind, str(cfg.mtm.path), cfg.embedder.kind
('edge', '/tmp/tm-doc-new/edge', 'sentence-transformers')
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, TypeAdapter, model_validator
from tiermem.config.backends import (
    BUILTIN_BACKENDS,
    Backend,
    BackendConfig,
    LlamaCppConfig,
    NoModelConfig,
    OllamaConfig,
    OpenAIConfig,
    backend_config,
)
from tiermem.config.embedders import (
    EMBEDDER_CLASSES,
    EmbedderConfig,
    Embedding,
    LlamaCppEmbedderConfig,
    OllamaEmbedderConfig,
    OpenAIEmbedderConfig,
    ServedEmbedderConfig,
    embedder_config,
)
from tiermem.config.section import Section, validated
from tiermem.config.stores import (
    MTM,
    EdgeStoreConfig,
    MTMConfig,
    QdrantConfig,
    ReferenceStoreConfig,
)
from tiermem.config.tuning import Expansion


class STMConfig(Section):
    """The working-memory window kept per (user, session)."""

    max_tokens: int = Field(default=1024, gt=0)
    max_turns: int = Field(default=32, gt=0)


class RoleConfig(Section):
    """One SLM role: on or off, its backend (the shared one if unset) and its budgets."""

    enabled: bool = True
    backend: Backend | None = None
    timeout_s: float = Field(default=30.0, gt=0)
    temperature: float = Field(default=0.0, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0)


ONLINE_ROLES = ("controller", "selector", "writer")  # SLMConfig's role sections


class SLMConfig(Section):
    """The online small-model roles. With ``backend.kind = "none"`` every role is model-free:
    the plain query, first-stage order, one verbatim entry per turn that is not small talk."""

    backend: Backend = NoModelConfig()
    controller: RoleConfig = RoleConfig()
    selector: RoleConfig = RoleConfig()
    writer: RoleConfig = RoleConfig(timeout_s=60.0)
    candidate_multiplier: int = Field(default=2, ge=1, le=8)
    selector_min_keep: int = Field(default=1, ge=0)
    # The selector's method. ``fusion`` (the default): the first stage's rank fusion, no model
    # call; on qwen0.5b listwise kept exactly what fusion keeps at 8.9 s a query
    # (``tiermem.presets``). ``listwise`` (one call names the supporting candidates) or
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
    selector_mode: Literal["fusion", "listwise", "pointwise", "cross-encoder"] = "fusion"
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
    # Apply the writer's update decisions ("replaces") as supersedes: the older entry leaves
    # default searches. Off by default: a wrong supersede hides a fact that is still true,
    # and the small local writers are not precise: qwen0.5b's supersedes were 1 right in 7
    # on ``bench writer`` (removed; da54a72) and 0 in 12 on ``bench updates``, and asked
    # whether a newer message makes an older one untrue, neither qwen0.5b nor qwen1.5b told
    # real changes from look-alikes (AUC 0.58 and 0.59). Off, the writer's entries are still
    # written and its "replaces" is counted (``replaces_off``); newer statements reach the
    # context as later statements (``delivery.later``). Turn it on for a writer measured
    # precise on ``bench updates``.
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


class ConsolidationConfig(Section):
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


class LTMConfig(Section):
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


class GeneratorConfig(Section):
    """What writes ``answer()``'s text. ``extractive`` quotes the memories it used; ``model``
    asks a model (its own backend, or the SLM backend if unset), falling back to extractive."""

    kind: Literal["extractive", "model"] = "extractive"
    backend: Backend | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    max_memories: int = Field(default=5, gt=0)
    # A context shares no word with the question and no hit is this close (dense cosine):
    # memory holds nothing about it (``tiermem.generator.supports``; all-MiniLM-L6-v2 scale).
    support_min_similarity: float = Field(default=0.35, ge=-1, le=1)


class DeliveryConfig(Expansion):
    """How ``context()`` and ``answer()`` spend a token budget (``tiermem.policy
    .DeliveryPolicy``): hits retrieved per token of budget, their cap, the budget of
    ``answer()``, the share of later statements there, and the tuning policy of expansion
    (``tiermem.config.tuning.Expansion``, whose fields this section takes)."""

    # one hit per this many tokens of budget: chosen leave-one-dataset-out (12 over 25 and 50)
    tokens_per_hit: int = Field(default=12, gt=0)
    max_hits: int = Field(default=200, gt=0)
    answer_budget_tokens: int = Field(default=1200, gt=0)
    answer_later: float = Field(default=0.6, ge=0, le=1)  # later statements in answer()


class JournalConfig(Section):
    """The SQLite journal: the audit log and the source turns that MTM entries point to.
    ``path=None`` keeps it in memory (tests)."""

    path: Path | None = None


DEFAULT_DATA_DIR = Path("~/.local/share/tiermem")
"""Where ``Memory.from_defaults()`` and the CLI keep the embedded default's files."""


def embedded_mtm(data_dir: Path) -> QdrantConfig | EdgeStoreConfig:
    """The embedded store under ``data_dir``: Qdrant Edge shards in ``<data_dir>/edge``
    (chosen by ``tiermem bench mtm``, docs/benchmarks.md), unless the directory already holds
    local mode's ``<data_dir>/qdrant`` and no shards."""
    if (data_dir / "qdrant").is_dir() and not (data_dir / "edge").exists():
        return QdrantConfig(location="path", path=data_dir / "qdrant")
    return EdgeStoreConfig(path=data_dir / "edge")


class TiermemConfig(Section):
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
        """The embedded default: Qdrant Edge shards and the audit log on disk under
        ``data_dir``. A data directory that holds embedded Qdrant (local mode, the default
        before Edge) and no shards keeps it: ``tiermem migrate --to edge`` moves it."""
        root = Path(data_dir).expanduser()
        return cls(
            data_dir=root,
            mtm=embedded_mtm(root),
            journal=JournalConfig(path=root / "journal.sqlite3"),
            ltm=LTMConfig(path=root / "ltm"),
        )

    @classmethod
    def for_tests(cls) -> TiermemConfig:
        """Everything in memory with the deterministic hash embedder: no files, no model."""
        return cls(embedder=EmbedderConfig(kind="hash", model="hash-384"))


USER_SETTINGS: Mapping[str, str] = {
    "data_dir": "where the embedded default keeps its files (Qdrant, the journal, LTM)",
    "default_k": "memories `search()` returns when no `k` is given",
    "embedder.kind": "`sentence-transformers` (in process), `ollama`, `openai`, `llamacpp`, "
    "`hash` (tests)",
    "embedder.model": "the embedding model of that kind",
    "embedder.device": "`cpu`, or a torch device for the in-process kinds",
    "mtm.kind": "`edge` (embedded: Qdrant Edge shards, one per user, the default), `qdrant` "
    "(qdrant-client: a server, or its local mode), `reference` (exact, in memory, for tests)",
    "mtm.location": "with `qdrant`: `url` (a server), `path` (local mode, on disk), `memory` "
    "(gone on close)",
    "mtm.path": "the embedded store's directory (default: under `data_dir`)",
    "mtm.url": 'a Qdrant server\'s address (`location = "url"`)',
    "mtm.api_key": "that server's key",
    "mtm.capacity": "entries per user before the least used are evicted",
    "stm.max_turns": "turns of the current session kept as working memory",
    "slm.backend.kind": "`none` (every role model-free, the default), `llamacpp`, `ollama`, "
    "`openai`",
    "slm.backend.model": "a `tiermem models` alias or GGUF path (llamacpp), a tag (ollama), a name",
    "slm.backend.host": "an Ollama server's address",
    "slm.backend.base_url": "an OpenAI-compatible server's address",
    "slm.selector_mode": "`fusion` (no model, the default), `cross-encoder`, `listwise`, "
    "`pointwise` (docs/presets.md)",
    "slm.cross_encoder": "the trained cross-encoder's directory (`tiermem train selector`)",
    "slm.controller.enabled": "the controller role runs on the model (else model-free)",
    "slm.selector.enabled": "the selector role runs on the model (else model-free)",
    "slm.writer.enabled": "the writer role runs on the model (else model-free)",
    "ltm.enabled": "the shared knowledge graph, built by offline consolidation",
    "ltm.path": "its directory (default: under `data_dir`)",
    "ltm.secret": "the key of its provenance hashes (hex, 16+ bytes; unset: generated and kept "
    "in `ltm.path/secret.key`)",
    "ltm.consolidation.interval_minutes": "how often consolidation runs",
    "generator.kind": "`extractive` (quotes the memories used) or `model`",
    "generator.max_memories": "memories `answer()` reads",
    "journal.path": "the SQLite audit log and source turns (default: under `data_dir`)",
    "delivery.answer_budget_tokens": "tokens of context `answer()` reads",
}
"""The settings a user holds, each with what it is for: the first page of the configuration
reference (``docs/configuration.md``). Every other setting is a connection detail of one
kind, or a tuning knob chosen by measurement (``docs/configuration-expert.md``)."""

_CONFIG: TypeAdapter[TiermemConfig] = TypeAdapter(TiermemConfig)


def merge_overrides(config: TiermemConfig, overrides: dict[str, object]) -> TiermemConfig:
    """Return ``config`` with nested ``overrides`` applied and validated again."""
    data = config.model_dump()
    _deep_update(data, overrides)
    return validated(_CONFIG, data)


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


__all__ = [
    "BUILTIN_BACKENDS",
    "DEFAULT_DATA_DIR",
    "EMBEDDER_CLASSES",
    "MTM",
    "ONLINE_ROLES",
    "USER_SETTINGS",
    "Backend",
    "BackendConfig",
    "ConsolidationConfig",
    "DeliveryConfig",
    "EdgeStoreConfig",
    "EmbedderConfig",
    "Embedding",
    "GeneratorConfig",
    "JournalConfig",
    "LTMConfig",
    "LlamaCppConfig",
    "LlamaCppEmbedderConfig",
    "MTMConfig",
    "NoModelConfig",
    "OllamaConfig",
    "OllamaEmbedderConfig",
    "OpenAIConfig",
    "OpenAIEmbedderConfig",
    "QdrantConfig",
    "ReferenceStoreConfig",
    "RoleConfig",
    "SLMConfig",
    "STMConfig",
    "Section",
    "ServedEmbedderConfig",
    "TiermemConfig",
    "backend_config",
    "embedded_mtm",
    "embedder_config",
    "merge_overrides",
]
