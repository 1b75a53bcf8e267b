"""Selectors, by ``slm.selector_mode`` (a ``tiermem.registry.Registry``): each builds from a
role runtime (``None``: no model, the first stage's order) and the pointwise settings, so the
memory and ``tiermem train``'s evaluation choose a selector the same way."""

from __future__ import annotations

from collections.abc import Callable

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


FUSION = "fusion"  # no model: the first stage's rank fusion, as it stands
SELECTORS: Registry[SelectorFactory] = Registry("selector")
SELECTORS.register(FUSION, lambda runtime, settings: TopKSelector())
SELECTORS.register("listwise", _listwise)
SELECTORS.register("pointwise", _pointwise)


def build_selector(kind: str, runtime: RoleRuntime | None, settings: PointwiseSettings) -> Selector:
    """The selector ``kind`` names; without a model, rank fusion whatever ``kind`` says."""
    return SELECTORS.factory(FUSION if runtime is None else kind)(runtime, settings)
