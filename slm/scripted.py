"""A scripted backend for tests: returns queued outputs and records every request.

Production does not register it: a test registers it as a backend kind through
``tiermem.slm.registry.registered_backend`` (the suite's ``scripted_models`` fixture does), so
the real pool and role code run against it. An output may be a string, a ``dict`` (sent as
JSON), an exception to raise, or a function of the request (for outputs that depend on the
prompt).

>>> from tiermem.slm.base import ChatMessage, SLMRequest
>>> backend = ScriptedBackend([{"answer": "Lisbon"}])
>>> backend.complete(SLMRequest("generator", [ChatMessage("user", "Where?")], {}, 8)).text
'{"answer": "Lisbon"}'
>>> [r.task for r in backend.requests]
['generator']

It scores next tokens too: ``score_with`` sets the probabilities (a mapping, a function of the
request, or an exception), ``score_requests`` records the calls. Token counts are words, and a
call evaluates only the words after the prefix it shares with the previous call, as a
KV-caching backend would.

>>> from tiermem.slm.base import ScoreRequest
>>> backend.score_with({"yes": 0.8, "no": 0.2})
>>> scores = backend.score_next_token(ScoreRequest("relevance", [ChatMessage("user", "Q? A")]))
>>> round(scores.logprobs["yes"], 3), scores.prompt_tokens
(-0.223, 2)
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tiermem.errors import SLMUnavailable
from tiermem.slm.base import ScoreRequest, SLMRequest, SLMResponse, TokenScores

ScriptItem = str | dict[str, Any] | BaseException | Callable[[SLMRequest], str | dict[str, Any]]
# choice -> probability (0 is log-probability -inf), or what to raise
ScoreItem = Mapping[str, float] | BaseException | Callable[[ScoreRequest], Mapping[str, float]]


class ScriptedBackend:
    name = "scripted"

    def __init__(
        self,
        outputs: Iterable[ScriptItem] = (),
        *,
        model: str = "scripted",
        default: ScriptItem | None = None,
    ) -> None:
        self._queue: deque[ScriptItem] = deque(outputs)
        self._default = default
        self._model = model
        self._lock = threading.Lock()
        self.requests: list[SLMRequest] = []
        self._scores: ScoreItem | None = None
        self._last_scored: list[str] = []
        self.score_requests: list[ScoreRequest] = []

    @property
    def model(self) -> str:
        return self._model

    def respond_with(self, default: ScriptItem) -> None:
        """What to answer once the queue is empty (a function of the request, typically)."""
        with self._lock:
            self._default = default

    def push(self, *outputs: ScriptItem) -> None:
        with self._lock:
            self._queue.extend(outputs)

    def calls_for(self, task: str) -> list[SLMRequest]:
        return [r for r in self.requests if r.task == task]

    def complete(self, request: SLMRequest) -> SLMResponse:
        with self._lock:
            self.requests.append(request)
            if self._queue:
                item = self._queue.popleft()
            elif self._default is not None:
                item = self._default
            else:
                raise SLMUnavailable(request.task, "the script has no output left")
        if isinstance(item, BaseException):
            raise item
        if callable(item):
            item = item(request)
        text = item if isinstance(item, str) else json.dumps(item)
        prompt = sum(len(m.content.split()) for m in request.messages)
        return SLMResponse(text, prompt, len(text.split()), self._model)

    def score_with(self, scores: ScoreItem) -> None:
        """What ``score_next_token`` answers: probabilities per choice, a function of the
        request giving them, or an exception to raise."""
        with self._lock:
            self._scores = scores

    def score_next_token(self, request: ScoreRequest) -> TokenScores:
        words = [w for m in request.messages for w in m.content.split()]
        with self._lock:
            self.score_requests.append(request)
            item = self._scores
            shared = 0
            for a, b in zip(self._last_scored, words, strict=False):
                if a != b:
                    break
                shared += 1
            shared = min(shared, max(0, len(words) - 1))  # the last word runs for its logits
            self._last_scored = words
        if item is None:
            raise SLMUnavailable(request.task, "no scores scripted")
        if isinstance(item, BaseException):
            raise item
        probabilities = item(request) if callable(item) else item
        logprobs = {c: math.log(p) if p > 0 else -math.inf for c, p in probabilities.items()}
        return TokenScores(logprobs, len(words), len(words) - shared, self._model)

    def close(self) -> None:
        return None


class BatchScriptedBackend(ScriptedBackend):
    """The scripted backend that also scores batches, as llama.cpp in-process does: each
    request is scored as ``score_next_token`` would, and ``batches`` records the batch sizes."""

    name = "scripted-batch"

    def __init__(self, outputs: Iterable[ScriptItem] = (), **kwargs: Any) -> None:
        super().__init__(outputs, **kwargs)
        self.batches: list[int] = []

    def score_next_tokens(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        with self._lock:
            self.batches.append(len(requests))
        return [self.score_next_token(r) for r in requests]
