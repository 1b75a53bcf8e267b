"""The meter stays bounded however long a service runs, and still sums every call."""

from __future__ import annotations

from tiermem.slm.meter import LATENCY_WINDOW, Meter


def test_latencies_keep_a_recent_window_and_a_total() -> None:
    meter = Meter()
    calls = LATENCY_WINDOW + 10
    for i in range(calls):
        meter.record_call("selector", ok=True, prompt_tokens=1, completion_tokens=1, latency_s=i)
    stats = meter.snapshot()["selector"]
    assert stats["calls"] == calls
    assert len(stats["latencies_s"]) == LATENCY_WINDOW  # type: ignore[arg-type]
    assert stats["latencies_s"][0] == 10  # type: ignore[index]  # the oldest are dropped
    assert stats["latency_total_s"] == sum(range(calls))
