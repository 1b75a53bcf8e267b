"""The thresholds and budgets of the online write and read paths, taken from the whole
configuration in one place (``policy_from_config``). Stages read them from here; planners and
selectors receive no budgets of their own.

>>> from tiermem.config import TiermemConfig
>>> policy_from_config(TiermemConfig.for_tests()).ltm_share  # LTM is off by default
0.0
"""

from __future__ import annotations

from dataclasses import dataclass

from tiermem.config import TiermemConfig


@dataclass(frozen=True, slots=True)
class Policy:
    """Every threshold and budget the pipeline applies.

    - ``merge_threshold``: cosine above which a new entry merges into a stored one
      (``slm.merge_threshold``);
    - ``supersede_min_similarity``: a writer's "replaces" is accepted only this close to the
      entry it would supersede (``slm.supersede_min_similarity``);
    - ``capacity``: entries per user before eviction (``mtm.capacity``);
    - ``candidate_multiplier``: first-stage candidates per final hit
      (``slm.candidate_multiplier``);
    - ``ltm_share``: the most of ``k`` that LTM facts may take; 0 when LTM is off
      (``ltm.max_share``);
    - ``selector_min_keep``: the fewest hits a model selector may keep (``slm.selector_min_keep``).

    The knowledge graph's own thresholds (merge, decay, search) are the LTM's, built from
    ``ltm`` by ``build_ltm``; the LTM tier's share of a search is here.
    """

    merge_threshold: float = 0.92
    supersede_min_similarity: float = 0.6
    capacity: int = 10_000
    candidate_multiplier: int = 2
    ltm_share: float = 0.0
    selector_min_keep: int = 1


def policy_from_config(config: TiermemConfig) -> Policy:
    """The one place where configuration becomes policy."""
    slm = config.slm
    return Policy(
        merge_threshold=slm.merge_threshold,
        supersede_min_similarity=slm.supersede_min_similarity,
        capacity=config.mtm.capacity,
        candidate_multiplier=slm.candidate_multiplier,
        ltm_share=config.ltm.max_share if config.ltm.enabled else 0.0,
        selector_min_keep=slm.selector_min_keep,
    )
