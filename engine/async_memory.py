"""``AsyncMemory``: the asyncio face of ``Memory``. Each call runs the same synchronous
implementation in a worker thread, so the event loop never blocks on a model or the store.

>>> import asyncio
>>> from tiermem import AsyncMemory, TiermemConfig
>>> async def demo() -> int:
...     async with AsyncMemory(TiermemConfig.for_tests()) as memory:
...         result = await memory.add("I started learning the cello.", user_id="bo")
...         return len(result.entries)
>>> asyncio.run(demo())
1
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from tiermem.clock import Clock
from tiermem.components import Components
from tiermem.config import TiermemConfig
from tiermem.context import DEFAULT_BUDGET_TOKENS, DeliveredContext
from tiermem.memory import ForgetReport, Memory
from tiermem.types import (
    AddResult,
    AnswerResult,
    AuditEvent,
    MemoryEntry,
    SearchFilters,
    SearchHit,
    Turn,
)
from tiermem.validation import MessageLike

if TYPE_CHECKING:
    from tiermem.journal import LTMAuditEvent
    from tiermem.offline.consolidate import ConsolidationReport
    from tiermem.offline.scheduler import SchedulerState


class AsyncMemory:
    """Same methods, same arguments, same results as ``Memory``, awaited."""

    def __init__(
        self,
        config: TiermemConfig,
        *,
        clock: Clock | None = None,
        components: Components | None = None,
    ) -> None:
        self.sync = Memory(config, clock=clock, components=components)

    @classmethod
    def from_defaults(
        cls,
        data_dir: str | Path | None = None,
        *,
        model: str | None = None,
        roles: str | Iterable[str] | None = None,
        ltm: bool = False,
        clock: Clock | None = None,
    ) -> AsyncMemory:
        memory = cls.__new__(cls)
        memory.sync = Memory.from_defaults(data_dir, model=model, roles=roles, ltm=ltm, clock=clock)
        return memory

    async def add(
        self,
        messages: MessageLike | Iterable[MessageLike],
        user_id: str,
        session_id: str | None = None,
    ) -> AddResult:
        return await asyncio.to_thread(self.sync.add, messages, user_id, session_id)

    async def search(
        self,
        query: str,
        user_id: str,
        k: int | None = None,
        filters: SearchFilters | None = None,
        session_id: str | None = None,
    ) -> list[SearchHit]:
        return await asyncio.to_thread(self.sync.search, query, user_id, k, filters, session_id)

    async def context(
        self,
        query: str,
        user_id: str,
        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
        session_id: str | None = None,
        filters: SearchFilters | None = None,
        k: int | None = None,
        expand: bool = True,
    ) -> DeliveredContext:
        return await asyncio.to_thread(
            self.sync.context, query, user_id, budget_tokens, session_id, filters, k, expand
        )

    async def answer(
        self,
        query: str,
        user_id: str,
        session_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> AnswerResult:
        return await asyncio.to_thread(self.sync.answer, query, user_id, session_id, filters)

    async def source_turns(self, hits: Iterable[SearchHit], user_id: str) -> dict[str, Turn]:
        return await asyncio.to_thread(self.sync.source_turns, hits, user_id)

    async def working_memory(self, user_id: str, session_id: str | None = None) -> tuple[Turn, ...]:
        return await asyncio.to_thread(self.sync.working_memory, user_id, session_id)

    async def get(self, memory_id: str, user_id: str) -> MemoryEntry:
        return await asyncio.to_thread(self.sync.get, memory_id, user_id)

    async def get_all(
        self, user_id: str, filters: SearchFilters | None = None
    ) -> list[MemoryEntry]:
        return await asyncio.to_thread(self.sync.get_all, user_id, filters)

    async def update(self, memory_id: str, text: str, user_id: str) -> MemoryEntry:
        return await asyncio.to_thread(self.sync.update, memory_id, text, user_id)

    async def delete(self, memory_id: str, user_id: str) -> None:
        await asyncio.to_thread(self.sync.delete, memory_id, user_id)

    async def history(self, memory_id: str, user_id: str) -> list[AuditEvent]:
        return await asyncio.to_thread(self.sync.history, memory_id, user_id)

    async def forget_user(self, user_id: str) -> ForgetReport:
        return await asyncio.to_thread(self.sync.forget_user, user_id)

    async def consolidate_now(self, user_id: str | None = None) -> ConsolidationReport:
        return await asyncio.to_thread(self.sync.consolidate_now, user_id)

    async def consolidation_state(self) -> SchedulerState:
        return await asyncio.to_thread(self.sync.consolidation_state)

    async def knowledge_history(self, item_id: str) -> list[LTMAuditEvent]:
        return await asyncio.to_thread(self.sync.knowledge_history, item_id)

    async def check_writable(self) -> None:
        await asyncio.to_thread(self.sync.check_writable)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
