"""Selectors, by ``slm.selector_mode`` (a ``tiermem.registry.Registry``): each builds from a
role runtime (``None``: no small model) and the selector settings, so the memory and
``tiermem bench selector`` choose a selector the same way. A selector that ``CALLS_SLM`` is
rank fusion without a runtime; the cross-encoder loads its own model directory."""

from __future__ import annotations

from collections.abc import Callable

from tiermem.errors import ConfigError
from tiermem.registry import Registry
from tiermem.roles.plan import Selector, TopKSelector
from tiermem.slm.roles.common import RoleRuntime
from tiermem.slm.roles.pointwise import PointwiseSettings

SelectorFactory = Callable[[RoleRuntime | None, PointwiseSettings], Selector]


def _needs_model(kind: str, runtime: RoleRuntime | None) -> RoleRuntime:
    if runtime is None:
        raise ValueError(f"the {kind} selector needs a model")  # a bug: callers check first
    return runtime


def _listwise(runtime: RoleRuntime | None, settings: PointwiseSettings) -> Selector:
    from tiermem.slm.roles.selector import SLMSelector

    return SLMSelector(_needs_model("listwise", runtime), settings.min_keep)


def _pointwise(runtime: RoleRuntime | None, settings: PointwiseSettings) -> Selector:
    from tiermem.slm.roles.pointwise import PointwiseSelector

    return PointwiseSelector(_needs_model("pointwise", runtime), settings)


def _cross_encoder(runtime: RoleRuntime | None, settings: PointwiseSettings) -> Selector:
    from tiermem.slm.roles.cross_encoder import CrossEncoderSelector

    return CrossEncoderSelector(settings)  # its own model: no SLM runtime needed


FUSION = "fusion"  # no model: the first stage's rank fusion, as it stands
CROSS_ENCODER = "cross-encoder"
READS_TOKEN_SCORES = "reads-token-scores"  # capability: needs a backend that scores tokens
CALLS_SLM = "calls-slm"  # capability: asks the role's small model (no model: rank fusion)
SELECTORS: Registry[SelectorFactory] = Registry("selector")
SELECTORS.register(FUSION, lambda runtime, settings: TopKSelector())
SELECTORS.register("listwise", _listwise, capabilities={CALLS_SLM})
SELECTORS.register("pointwise", _pointwise, capabilities={READS_TOKEN_SCORES, CALLS_SLM})
SELECTORS.register(CROSS_ENCODER, _cross_encoder)


def check_selector_backend(kind: str, backend_kind: str) -> None:
    """Refuse selector ``kind`` on a backend kind that lacks what it reads, before either is
    built (``ConfigError``)."""
    from tiermem.slm.registry import BACKENDS, SCORES_TOKENS

    if SELECTORS.can(kind, READS_TOKEN_SCORES) and not BACKENDS.can(backend_kind, SCORES_TOKENS):
        raise ConfigError(
            f"the {kind} selector needs a backend that scores tokens;"
            f" backend kind {backend_kind!r} does not"
        )


def build_selector(kind: str, runtime: RoleRuntime | None, settings: PointwiseSettings) -> Selector:
    """The selector ``kind`` names; one that asks the small model is rank fusion without one
    (the cross-encoder brings its own model, and runs on the model-free default too)."""
    if runtime is None and SELECTORS.can(kind, CALLS_SLM):
        kind = FUSION
    return SELECTORS.factory(kind)(runtime, settings)
