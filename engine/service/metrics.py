"""``/metrics`` in the Prometheus text format: request latency per route, requests in flight,
and, read from the memory at each scrape, its model calls, fallbacks and tokens per role (the
``Meter``) and its consolidation runs (the scheduler).

Each app has its own registry, so two apps in one process (tests) never share a series. Every
label takes known values only, whatever a client sends: a route template or ``<unmatched>``,
an HTTP method or ``OTHER``, a status the service answers or its class (``5xx``). Junk
requests cannot grow the page.

>>> method_label("GET"), method_label("JUNK000001")
('GET', 'OTHER')
>>> status_label(503), status_label(299)
('503', '2xx')
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from tiermem.errors import ConfigError
from tiermem.memory import Memory

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
UNMATCHED = "<unmatched>"  # one label for every path no route serves: bounded cardinality
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# What the app answers (the codes' statuses, the protocol's own, success): labels as they are.
STATUSES = frozenset(
    {200, 201, 204, 400, 401, 403, 404, 405, 408, 409, 413, 422, 429, 500, 502, 503, 504}
)
# From a cached read (milliseconds) to a model-backed answer or consolidation (minutes).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_METER_COUNTERS = {
    "calls": "model calls",
    "ok": "calls whose output was valid",
    "invalid": "calls whose output failed validation",
    "timeouts": "calls past the role's time budget",
    "unavailable": "calls the backend could not serve",
    "fallbacks": "times the role fell back to its model-free stage",
}
_TOKEN_KINDS = ("prompt", "evaluated", "completion")


class MemoryCollector(Collector):
    """The memory's own counters, read when Prometheus scrapes."""

    def __init__(self, memory: Memory) -> None:
        self._memory = memory

    def collect(self) -> Iterator[Metric]:
        snapshot = self._memory.meter.snapshot()
        for field, what in _METER_COUNTERS.items():
            family = CounterMetricFamily(f"tiermem_slm_{field}", f"SLM {what}", labels=["role"])
            for role, stats in sorted(snapshot.items()):
                family.add_metric([role], float(stats[field]))  # type: ignore[arg-type]
            yield family
        tokens = CounterMetricFamily("tiermem_slm_tokens", "SLM tokens", labels=["role", "kind"])
        for role, stats in sorted(snapshot.items()):
            for kind in _TOKEN_KINDS:
                tokens.add_metric([role, kind], float(stats[f"{kind}_tokens"]))  # type: ignore[arg-type]
        yield tokens
        yield from self._consolidation()

    def _consolidation(self) -> Iterator[Metric]:
        try:
            state = self._memory.consolidation_state()
        except ConfigError:  # LTM is off: no scheduler, no series
            return
        runs = CounterMetricFamily("tiermem_consolidation_runs", "consolidation runs finished")
        runs.add_metric([], float(state.runs))
        yield runs
        failing = GaugeMetricFamily(
            "tiermem_consolidation_failures", "consolidation runs failed in a row"
        )
        failing.add_metric([], float(state.failures))
        yield failing
        running = GaugeMetricFamily("tiermem_consolidation_running", "1 while a run is going")
        running.add_metric([], float(state.running))
        yield running


class ServiceMetrics:
    """The registry of one app."""

    def __init__(self, memory: Memory) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "tiermem_request_duration_seconds",
            "HTTP request latency, by route template, method and status",
            ["route", "method", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "tiermem_requests_in_flight", "requests being served", registry=self.registry
        )
        self.registry.register(MemoryCollector(memory))

    def render(self) -> bytes:
        return generate_latest(self.registry)


def method_label(method: str) -> str:
    return method if method in METHODS else "OTHER"


def status_label(status: int) -> str:
    return str(status) if status in STATUSES else f"{status // 100}xx"


class RequestTimer:
    """ASGI middleware: each request's latency into ``metrics``, labelled by the route
    template that served it (never the raw path), its method and its status."""

    def __init__(self, app: ASGIApp, *, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # what the client sees if the app dies before answering
        started = time.perf_counter()

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_status)
        finally:
            self.metrics.in_flight.dec()
            route = getattr(scope.get("route"), "path", UNMATCHED)
            labels = (route, method_label(scope["method"]), status_label(status))
            self.metrics.latency.labels(*labels).observe(time.perf_counter() - started)
