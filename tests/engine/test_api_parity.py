"""Memory and AsyncMemory are one implementation: the same script through both faces gives
the same results."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from tiermem import AsyncMemory, ManualClock, Memory, MemoryNotFoundError, TiermemConfig

from tests.conftest import T0, chat

Call = Callable[..., Any]


def _script(call: Callable[[str, Any], Any]) -> list[object]:
    """Run the same API calls; ``call(name, *args)`` dispatches to one face."""
    out: list[object] = []
    added = call(
        "add",
        chat(
            ("user", "I grow chillies."),
            ("assistant", "Hot ones?"),
            ("user", "Carolina Reapers, on the balcony."),
        ),
        "ana",
        "s1",
    )
    out.append([e.text for e in added.entries])
    hits = call("search", "chillies balcony", "ana", 2)
    out.append([(h.entry.text, round(h.score, 6)) for h in hits])
    out.append(sorted(t.content for t in call("source_turns", hits, "ana").values()))
    out.append([t.content for t in call("working_memory", "ana", "s1")])
    first = added.entries[0].id
    out.append(call("update", first, "Ana grows chillies and basil.", "ana").text)
    out.append(call("get", first, "ana").text)
    out.append([e.op for e in call("history", first, "ana")])
    out.append(call("answer", "what do I grow", "ana", "s1").text)
    out.append(call("context", "chillies balcony", "ana", 60).text)
    call("delete", first, "ana")
    out.append(len(call("get_all", "ana")))
    try:
        call("get", first, "ana")
    except MemoryNotFoundError as exc:
        out.append(type(exc).__name__)
    report = call("forget_user", "ana")
    out.append((report.entries, report.turns, report.audit_rows))
    return out


def test_sync_and_async_faces_agree() -> None:
    sync_memory = Memory(TiermemConfig.for_tests(), clock=ManualClock(T0))
    with sync_memory:
        sync_out = _script(lambda name, *args: getattr(sync_memory, name)(*args))

    async def run_async() -> list[object]:
        async_memory = AsyncMemory(TiermemConfig.for_tests(), clock=ManualClock(T0))
        loop = asyncio.get_running_loop()
        async with async_memory:

            def call(name: str, *args: Any) -> Any:
                coroutine: Awaitable[Any] = getattr(async_memory, name)(*args)
                # the script is synchronous; run each awaited call to completion in turn
                return asyncio.run_coroutine_threadsafe(coroutine, loop).result()  # type: ignore[arg-type]

            return await asyncio.to_thread(_script, call)

    assert asyncio.run(run_async()) == sync_out
    # 4 entries left (2 turns, 2 exchanges); 3 turns; 5 ADD + UPDATE + DELETE rows
    assert sync_out[-1] == (4, 3, 7)


def _public_methods(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}


def test_every_public_method_has_an_async_twin() -> None:
    """The two faces have the same public methods; each of Memory's but the constructor is
    awaited on AsyncMemory. A method added to Memory alone fails here."""
    assert _public_methods(AsyncMemory) == _public_methods(Memory)
    for name in _public_methods(Memory) - {"from_defaults"}:
        assert asyncio.iscoroutinefunction(getattr(AsyncMemory, name)), name


def test_async_calls_run_concurrently_without_blocking_the_loop() -> None:
    async def run() -> int:
        async with AsyncMemory(TiermemConfig.for_tests()) as memory:
            stamp = datetime(2026, 1, 1, tzinfo=UTC)
            await asyncio.gather(
                *[
                    memory.add(
                        [{"content": f"fact number {i}", "timestamp": stamp}], user_id=f"u{i % 3}"
                    )
                    for i in range(12)
                ]
            )
            counts = await asyncio.gather(*[memory.get_all(f"u{i}") for i in range(3)])
            return sum(len(c) for c in counts)

    assert asyncio.run(run()) == 12


@pytest.mark.parametrize("face", ["sync", "async"])
def test_closed_memory_refuses_calls(face: str) -> None:
    from tiermem import ClosedError

    memory = Memory(TiermemConfig.for_tests())
    memory.close()
    memory.close()  # idempotent
    if face == "sync":
        with pytest.raises(ClosedError):
            memory.search("x", "ana")
        return
    wrapper = AsyncMemory.__new__(AsyncMemory)
    wrapper.sync = memory
    with pytest.raises(ClosedError):
        asyncio.run(wrapper.search("x", "ana"))
