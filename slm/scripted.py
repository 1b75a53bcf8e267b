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
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from tiermem.errors import SLMUnavailable
from tiermem.slm.base import SLMRequest, SLMResponse

ScriptItem = str | dict[str, Any] | BaseException | Callable[[SLMRequest], str | dict[str, Any]]


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

    def close(self) -> None:
        return None
