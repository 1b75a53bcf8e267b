"""One meter for every model call: calls, failures, fallbacks, tokens and latency per task.

``prompt_tokens`` counts every prompt token a call sent; ``evaluated_tokens`` those the model
ran (fewer when a backend reused a cached prefix, as relevance scoring does).

``add()``, ``search()`` and the benchmarks read it; a snapshot is a plain dict.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from dataclasses import dataclass, field

# Latencies kept per task: the most recent calls only, so a long-running service's meter (and
# each /metrics scrape, which copies it) stays bounded. ``latency_total_s`` sums every call.
LATENCY_WINDOW = 4096


@dataclass
class TaskStats:
    calls: int = 0
    ok: int = 0
    invalid: int = 0
    timeouts: int = 0
    unavailable: int = 0
    fallbacks: int = 0
    prompt_tokens: int = 0
    evaluated_tokens: int = 0
    completion_tokens: int = 0
    latencies_s: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))
    latency_total_s: float = 0.0
    events: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "calls": self.calls,
            "ok": self.ok,
            "invalid": self.invalid,
            "timeouts": self.timeouts,
            "unavailable": self.unavailable,
            "fallbacks": self.fallbacks,
            "prompt_tokens": self.prompt_tokens,
            "evaluated_tokens": self.evaluated_tokens,
            "completion_tokens": self.completion_tokens,
            "latencies_s": list(self.latencies_s),
            "latency_total_s": self.latency_total_s,
            "events": dict(self.events),
        }


class Meter:
    """Thread-safe counters, keyed by task name.

    >>> meter = Meter()
    >>> meter.record_call("writer", ok=True, prompt_tokens=120, completion_tokens=30, latency_s=0.5)
    >>> meter.totals()["calls"], meter.totals()["prompt_tokens"]
    (1, 120)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: dict[str, TaskStats] = defaultdict(TaskStats)

    def record_call(
        self,
        task: str,
        *,
        ok: bool,
        prompt_tokens: int,
        completion_tokens: int,
        latency_s: float,
        failure: str | None = None,
        evaluated_tokens: int | None = None,
    ) -> None:
        """``evaluated_tokens``: the prompt tokens the model ran; ``None``: all of them."""
        with self._lock:
            stats = self._tasks[task]
            stats.calls += 1
            stats.prompt_tokens += prompt_tokens
            stats.evaluated_tokens += (
                prompt_tokens if evaluated_tokens is None else evaluated_tokens
            )
            stats.completion_tokens += completion_tokens
            stats.latencies_s.append(latency_s)
            stats.latency_total_s += latency_s
            if ok:
                stats.ok += 1
            elif failure == "timeout":
                stats.timeouts += 1
            elif failure == "unavailable":
                stats.unavailable += 1
            else:
                stats.invalid += 1

    def record_no_answer(self, task: str, *, timed_out: bool, latency_s: float) -> None:
        """A call that got no answer: it timed out, or the backend was unavailable."""
        self.record_call(
            task,
            ok=False,
            prompt_tokens=0,
            completion_tokens=0,
            latency_s=latency_s,
            failure="timeout" if timed_out else "unavailable",
        )

    def mark_invalid(self, task: str) -> None:
        """A call that parsed but failed a semantic check (an id that is not a candidate)."""
        with self._lock:
            stats = self._tasks[task]
            if stats.ok:
                stats.ok -= 1
                stats.invalid += 1

    def record_fallback(self, task: str) -> None:
        with self._lock:
            self._tasks[task].fallbacks += 1

    def record_event(self, task: str, event: str) -> None:
        """Count a guard that overrode a model's output (``supersede_rejected``, ...)."""
        with self._lock:
            events = self._tasks[task].events
            events[event] = events.get(event, 0) + 1

    def event_count(self, task: str, event: str) -> int:
        """How often ``event`` was recorded for ``task``: 0 if it never was."""
        with self._lock:
            stats = self._tasks.get(task)
            return stats.events.get(event, 0) if stats is not None else 0

    def snapshot(self) -> dict[str, dict[str, object]]:
        with self._lock:
            return {task: stats.as_dict() for task, stats in self._tasks.items()}

    def totals(self) -> dict[str, int]:
        with self._lock:
            keys = (
                "calls",
                "ok",
                "invalid",
                "timeouts",
                "unavailable",
                "fallbacks",
                "prompt_tokens",
                "evaluated_tokens",
                "completion_tokens",
            )
            return {k: sum(int(getattr(s, k)) for s in self._tasks.values()) for k in keys}

    def reset(self) -> None:
        with self._lock:
            self._tasks.clear()
