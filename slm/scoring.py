"""Score a choice of next tokens instead of generating: call, check, meter.

``score_task`` is to ``NextTokenScorer.score_next_token`` what ``run_task`` is to
``complete``: one metered call within a time budget that returns valid scores or raises
``SLMError``; ``score_batch_task`` does the same for a batch of them. The pure helpers turn
what backends see into choice log-probabilities.

>>> top = [(" Yes", -0.2), ("yes", -2.0), ("No", -1.9)]
>>> logprobs, floored = choice_logprobs(top, ("yes", "no", "maybe"))
>>> round(math.exp(logprobs["yes"]), 3), floored
(0.954, ('maybe',))
>>> round(yes_probability({"yes": math.log(0.6), "no": math.log(0.2)}), 2)
0.75
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from tiermem.errors import SLMError, SLMOutputInvalid, SLMTimeout
from tiermem.slm.base import BatchNextTokenScorer, NextTokenScorer, ScoreRequest, TokenScores
from tiermem.slm.meter import Meter

# A log-probability a little above zero is rounding (servers send float32), not an error.
_LOGPROB_SLACK = 1e-3


def logsumexp(values: Iterable[float]) -> float:
    """log(sum(exp(v))), stable; ``-inf`` for no values."""
    items = list(values)
    top = max(items, default=-math.inf)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(v - top) for v in items))


def spells(token: str, choice: str) -> bool:
    """Whether a token spells ``choice`` as a first answer word: any casing, any surrounding
    whitespace (``Yes``, `` yes``, ``YES``)."""
    return token.strip().casefold() == choice.casefold()


def choice_logprobs(
    top: Sequence[tuple[str, float]], choices: Sequence[str]
) -> tuple[dict[str, float], tuple[str, ...]]:
    """Each choice's log-probability from a server's top log-probabilities of the first answer
    token, summed over the tokens that spell it. A choice no listed token spells gets the
    smallest log-probability listed (it was not in the top N, so its own is at most that) and
    is named in the second value. A token listed twice counts once."""
    unique = dict(top)
    floor = min(unique.values(), default=-math.inf)
    out: dict[str, float] = {}
    floored: list[str] = []
    for choice in choices:
        matched = [lp for token, lp in unique.items() if spells(token, choice)]
        if matched:
            out[choice] = logsumexp(matched)
        else:
            out[choice] = floor
            floored.append(choice)
    return out, tuple(floored)


def yes_probability(logprobs: Mapping[str, float], yes: str = "yes", no: str = "no") -> float:
    """P(yes) / (P(yes) + P(no)): the two answers renormalised, so the mass the model puts on
    other tokens does not matter. 0.5 when neither has any."""
    lp_yes, lp_no = logprobs[yes], logprobs[no]
    if lp_yes == -math.inf and lp_no == -math.inf:
        return 0.5
    if lp_no - lp_yes > 700:  # exp would overflow; the answer is 0 to double precision
        return 0.0
    return 1.0 / (1.0 + math.exp(lp_no - lp_yes))


def check_scores(request: ScoreRequest, scores: TokenScores) -> None:
    """Refuse scores a caller cannot use: a choice missing, a log-probability that is NaN or
    above zero, token counts that do not add up."""

    def invalid(reason: str) -> SLMOutputInvalid:
        return SLMOutputInvalid(request.task, repr(dict(scores.logprobs)), reason)

    for choice in request.choices:
        value = scores.logprobs.get(choice)
        if value is None:
            raise invalid(f"no score for {choice!r}")
        if math.isnan(value) or value > _LOGPROB_SLACK:
            raise invalid(f"{choice!r} has log-probability {value}")
    if not 0 <= scores.evaluated_tokens <= scores.prompt_tokens:
        raise invalid(
            f"evaluated {scores.evaluated_tokens} of {scores.prompt_tokens} prompt tokens"
        )


def score_task(backend: NextTokenScorer, request: ScoreRequest, meter: Meter) -> TokenScores:
    """One metered scoring call (under ``request.task``); raises ``SLMError`` on failure, an
    answer later than ``request.timeout_s`` included."""
    return _metered(lambda: [backend.score_next_token(request)], [request], meter)[0]


def score_batch_task(
    backend: BatchNextTokenScorer, requests: Sequence[ScoreRequest], meter: Meter
) -> list[TokenScores]:
    """The requests (of one task) in one call, which must answer within the first request's
    ``timeout_s``. Each is metered as a call of its own, with an equal share of the latency,
    so a batched query and one call per candidate meter alike."""
    if not requests:
        return []
    return _metered(lambda: backend.score_next_tokens(requests), requests, meter)


def _metered(
    call: Callable[[], list[TokenScores]], requests: Sequence[ScoreRequest], meter: Meter
) -> list[TokenScores]:
    task, budget = requests[0].task, requests[0].timeout_s
    started = time.perf_counter()
    try:
        results = call()
    except SLMError as exc:
        timed_out = isinstance(exc, SLMTimeout)
        latency = time.perf_counter() - started
        meter.record_no_answer(task, timed_out=timed_out, latency_s=latency)
        raise
    latency = time.perf_counter() - started
    if len(results) != len(requests):
        meter.record_call(task, ok=False, prompt_tokens=0, completion_tokens=0, latency_s=latency)
        raise SLMOutputInvalid(task, "", f"{len(results)} scores for {len(requests)} requests")
    error: SLMError | None = None
    late = SLMTimeout(task, f"scored after {latency:.1f} s, budget {budget:.1f} s")
    for request, scores in zip(requests, results, strict=True):
        failure: str | None = None
        if latency > budget:
            failure, error = "timeout", late
        else:
            try:
                check_scores(request, scores)
            except SLMOutputInvalid as exc:
                failure, error = "invalid", error or exc
        meter.record_call(
            task,
            ok=failure is None,
            prompt_tokens=scores.prompt_tokens,
            completion_tokens=0,
            latency_s=latency / len(requests),
            failure=failure,
            evaluated_tokens=scores.evaluated_tokens,
        )
    if error is not None:
        raise error
    return results


__all__ = [
    "check_scores",
    "choice_logprobs",
    "logsumexp",
    "score_batch_task",
    "score_task",
    "spells",
    "yes_probability",
]
