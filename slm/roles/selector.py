"""SLM-2 as the read path's selector: keeps at most K of the <= 2K candidates.

The model returns the numbers of supporting candidates, most useful first; each kept
candidate's selector score is ``1 - (position / K)``, so the order is the model's and the
scores can be evaluated and tuned. ``min_keep`` fills up from the first-stage order when the
model keeps fewer (a weak model returning nothing must not empty the context).

Fallback (counted): on invalid output, timeout or an unreachable backend, the first K
candidates in fused first-stage order.
"""

from __future__ import annotations

from collections.abc import Sequence

from tiermem.errors import SLMError, SLMOutputInvalid
from tiermem.render import render_memory
from tiermem.roles.plan import Candidate, Selection
from tiermem.slm.prompts import selector as prompt
from tiermem.slm.roles.common import Role, RoleRuntime


def first_stage_fallback(
    runtime: RoleRuntime,
    task: str,
    candidates: Sequence[Candidate],
    k: int,
    exc: SLMError,
    *,
    parsed: bool = False,
) -> Selection:
    """A selector's fallback, counted under ``task``: the first ``k`` candidates in fused
    first-stage order, scored by their fused score."""
    runtime.fallback(task, exc, "first-stage order", parsed=parsed)
    return Selection(tuple((c, c.fused) for c in candidates[:k]), "fallback")


class SLMSelector(Role):
    name = "slm-selector"

    def __init__(self, runtime: RoleRuntime, min_keep: int = 1) -> None:
        super().__init__(runtime)
        self._min_keep = min_keep

    def select(self, queries: Sequence[str], candidates: Sequence[Candidate], k: int) -> Selection:
        if not candidates:
            return Selection((), "passthrough")
        shown = list(candidates[: prompt.MAX_CANDIDATES])
        inp = prompt.SelectorInput(queries, [render_memory(c.item) for c in shown], k)
        try:
            output = self._rt.call(
                prompt.SPEC, prompt.build_messages(inp), prompt.schema(len(shown), k)
            )
        except SLMError as exc:
            return self._fallback(candidates, k, exc)
        try:
            picked = self._checked(output.supporting, len(shown), k)
        except SLMOutputInvalid as exc:  # parsed, but named non-candidates
            return self._fallback(candidates, k, exc, parsed=True)
        kept = [(shown[i], 1.0 - pos / k) for pos, i in enumerate(picked)]
        if len(kept) < min(self._min_keep, k):
            chosen = set(picked)
            for i, c in enumerate(shown):
                if len(kept) >= min(self._min_keep, k):
                    break
                if i not in chosen:
                    kept.append((c, 0.0))
        return Selection(tuple(kept), "model")

    def _fallback(
        self, candidates: Sequence[Candidate], k: int, exc: SLMError, *, parsed: bool = False
    ) -> Selection:
        return first_stage_fallback(self._rt, prompt.SPEC.name, candidates, k, exc, parsed=parsed)

    def _checked(self, numbers: Sequence[int], count: int, k: int) -> list[int]:
        """Model numbers -> candidate indices; out-of-range numbers make the output invalid,
        repeats are ignored, and only the first ``k`` count."""
        picked: list[int] = []
        for n in numbers:
            if not 1 <= n <= count:
                raise SLMOutputInvalid(
                    prompt.SPEC.name, str(list(numbers)), f"number {n} is not a candidate"
                )
            if n - 1 not in picked:
                picked.append(n - 1)
        return picked[:k]
