"""The collaborators of one ``Memory``, built once and passed around as one frozen bundle."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from tiermem.clock import Clock, SystemClock
from tiermem.config import LTMConfig, RoleConfig, SLMConfig, TiermemConfig
from tiermem.embedding import Embedder, build_embedder
from tiermem.generator import Generator
from tiermem.journal import Journal
from tiermem.ltm.graph import DecayPolicy
from tiermem.ltm.provenance import Provenance, load_or_create_secret
from tiermem.ltm.store import AuditSink, LongTermMemory, SearchPolicy
from tiermem.policy import Policy, policy_from_config
from tiermem.presets import running_roles, warn_losing_roles
from tiermem.roles.extract import EntryExtractor, TurnExtractor
from tiermem.roles.plan import PassthroughPlanner, Planner, Selector
from tiermem.slm.meter import Meter
from tiermem.slm.registry import BackendPool
from tiermem.slm.roles.common import RoleRuntime
from tiermem.stm import ShortTermMemory
from tiermem.stores import MTMStore, build_mtm_store
from tiermem.tokens import ApproxTokenCounter, TokenCounter


@dataclass(frozen=True, slots=True)
class Components:
    embedder: Embedder
    store: MTMStore
    journal: Journal
    stm: ShortTermMemory
    extractor: EntryExtractor
    planner: Planner
    selector: Selector
    generator: Generator
    tokens: TokenCounter
    clock: Clock
    policy: Policy = field(default_factory=Policy)
    meter: Meter = field(default_factory=Meter)
    closers: tuple[Callable[[], None], ...] = ()
    ltm: LongTermMemory | None = None
    pool: BackendPool | None = None


def build_components(config: TiermemConfig, clock: Clock | None = None) -> Components:
    """Build every collaborator that ``config`` names. Models load lazily, on first use."""
    embedder = build_embedder(config.embedder)
    tokens = ApproxTokenCounter()
    meter = Meter()
    policy = policy_from_config(config)
    roles = _build_roles(config, policy, meter)
    store = build_mtm_store(config.mtm, embedder.dim, embedder.name)
    try:
        journal = Journal(config.journal.path)
    except BaseException:
        store.close()
        raise
    try:
        ltm = (
            build_ltm(config.ltm, embedder.dim, audit=journal.record_ltm, embedder=embedder.name)
            if config.ltm.enabled
            else None
        )
    except BaseException:
        store.close()
        journal.close()
        raise
    return Components(
        embedder=embedder,
        store=store,
        journal=journal,
        stm=ShortTermMemory(config.stm, tokens),
        tokens=tokens,
        clock=clock or SystemClock(),
        policy=policy,
        meter=meter,
        planner=roles.planner,
        selector=roles.selector,
        extractor=roles.extractor,
        generator=roles.generator,
        closers=roles.closers,
        ltm=ltm,
        pool=roles.pool,
    )


def build_ltm(
    config: LTMConfig, dim: int, audit: AuditSink | None = None, embedder: str | None = None
) -> LongTermMemory:
    """The knowledge graph under ``config.path`` (loaded if saved), or in memory; a saved
    graph that another embedder than ``embedder`` wrote is ``LTMEmbedderMismatchError``."""
    if config.secret is not None:
        secret = bytes.fromhex(config.secret.get_secret_value())
    elif config.path is not None:
        secret = load_or_create_secret(config.path.expanduser() / "secret.key")
    else:
        secret = secrets.token_bytes(32)
    return LongTermMemory(
        config.path.expanduser() if config.path is not None else None,
        dim,
        Provenance(secret),
        decay=DecayPolicy(config.evidence_gain, config.half_life_days, config.prune_below),
        search_policy=SearchPolicy(
            config.search_seeds, config.search_hops, config.search_min_similarity
        ),
        merge_threshold=config.merge_threshold,
        audit=audit,
        embedder=embedder,
    )


@dataclass(frozen=True, slots=True)
class _Roles:
    planner: Planner
    selector: Selector
    extractor: EntryExtractor
    generator: Generator
    closers: tuple[Callable[[], None], ...]
    pool: BackendPool


def _build_roles(config: TiermemConfig, policy: Policy, meter: Meter) -> _Roles:
    """The SLM roles the configuration turns on, model-free stages for the rest."""
    from tiermem.slm.registry import NO_MODEL, check_backend_kinds, role_runtime
    from tiermem.slm.roles.controller import SLMController
    from tiermem.slm.roles.generator import CALLS_MODEL, GENERATORS
    from tiermem.slm.roles.selectors import check_selector_backend
    from tiermem.slm.roles.writer import SLMWriter

    check_backend_kinds(config)  # a misspelt kind fails here, even on a role that is off
    warn_losing_roles(running_roles(config))  # runs, but says what it was measured to cost
    slm = config.slm
    selector_backend = slm.selector.backend or slm.backend
    if slm.selector.enabled and selector_backend.kind != NO_MODEL:
        check_selector_backend(slm.selector_mode, selector_backend.kind)
    pool = BackendPool(slm.models_dir)
    controller = role_runtime(slm, slm.controller, pool, meter)
    selector = role_runtime(slm, slm.selector, pool, meter)
    writer = role_runtime(slm, slm.writer, pool, meter)
    generator_kind = config.generator.kind
    generator = None
    if GENERATORS.can(generator_kind, CALLS_MODEL):
        generator_role = RoleConfig(
            backend=config.generator.backend or slm.backend, timeout_s=config.generator.timeout_s
        )
        generator = role_runtime(slm, generator_role, pool, meter)
    return _Roles(
        planner=SLMController(controller) if controller else PassthroughPlanner(),
        selector=_selector(slm, selector, policy),
        extractor=SLMWriter(writer, slm.writer_max_turns, supersedes=slm.writer_supersedes)
        if writer
        else TurnExtractor(),
        generator=GENERATORS.factory(generator_kind)(generator),
        closers=(pool.close,),
        pool=pool,
    )


def _selector(slm: SLMConfig, runtime: RoleRuntime | None, policy: Policy) -> Selector:
    """The selector ``slm.selector_mode`` names; first-stage order when the role is off, or
    when the selector asks a small model and none is configured."""
    from tiermem.slm.roles.pointwise import PointwiseSettings
    from tiermem.slm.roles.selectors import FUSION, build_selector

    settings = PointwiseSettings(
        slm.pointwise_weight,
        slm.pointwise_threshold,
        policy.selector_min_keep,
        slm.cross_encoder,
        slm.cross_encoder_threshold,
        slm.cross_encoder_precision,
    )
    kind = slm.selector_mode if slm.selector.enabled else FUSION
    return build_selector(kind, runtime, settings)
