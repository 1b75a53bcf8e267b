"""The client API, declared once: what every face of a memory offers.

``MemoryAPI`` is the synchronous face (``Memory``, in process; ``RemoteMemory``, over HTTP),
``AsyncMemoryAPI`` its awaited twin (``AsyncMemory``, ``AsyncRemoteMemory``). The service's
``Calls`` builds one request per method with the same parameters. Every face's signatures
(names, kinds, defaults, annotations) are checked against these in
``tests/engine/test_api_signatures.py``: a parameter added here and not there, or a default
that drifts, fails it. ``Memory``'s own docstrings say what each method does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from tiermem.context import DEFAULT_BUDGET_TOKENS, DeliveredContext
from tiermem.pipeline.forget import ForgetReport
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


class MemoryAPI(Protocol):
    """A memory, called and answered in turn."""

    def add(
        self,
        messages: MessageLike | Iterable[MessageLike],
        user_id: str,
        session_id: str | None = None,
    ) -> AddResult:
        """Remember an exchange."""
        ...

    def search(
        self,
        query: str,
        user_id: str,
        k: int | None = None,
        filters: SearchFilters | None = None,
        session_id: str | None = None,
    ) -> list[SearchHit]:
        """The best ``k`` memories for ``query``."""
        ...

    def context(
        self,
        query: str,
        user_id: str,
        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
        session_id: str | None = None,
        filters: SearchFilters | None = None,
        k: int | None = None,
        expand: bool = True,
    ) -> DeliveredContext:
        """What to put in a prompt about ``query``, within ``budget_tokens``."""
        ...

    def answer(
        self,
        query: str,
        user_id: str,
        session_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> AnswerResult:
        """An answer to ``query`` from memory, with its hits and source turns."""
        ...

    def source_turns(self, hits: Iterable[SearchHit], user_id: str) -> dict[str, Turn]:
        """The stored turns the hits point back to."""
        ...

    def working_memory(self, user_id: str, session_id: str | None = None) -> tuple[Turn, ...]:
        """The recent turns of a session (STM)."""
        ...

    def get(self, memory_id: str, user_id: str) -> MemoryEntry:
        """One memory of this user."""
        ...

    def get_all(self, user_id: str, filters: SearchFilters | None = None) -> list[MemoryEntry]:
        """Every memory of this user (under ``filters``)."""
        ...

    def update(self, memory_id: str, text: str, user_id: str) -> MemoryEntry:
        """A memory's new text, audited."""
        ...

    def delete(self, memory_id: str, user_id: str) -> None:
        """Delete a memory, audited."""
        ...

    def history(self, memory_id: str, user_id: str) -> list[AuditEvent]:
        """A memory's audit rows, oldest first."""
        ...

    def forget_user(self, user_id: str) -> ForgetReport:
        """Erase a user from every store."""
        ...

    def consolidate_now(self, user_id: str | None = None) -> ConsolidationReport:
        """Consolidate one user's (or every user's) new entries into LTM now."""
        ...

    def consolidation_state(self) -> SchedulerState:
        """The consolidation scheduler's state."""
        ...

    def knowledge_history(self, item_id: str) -> list[LTMAuditEvent]:
        """A knowledge item's audit rows, oldest first."""
        ...

    def check_writable(self) -> None:
        """Raise the typed error a write would meet now (a full disk, a store down)."""
        ...

    def close(self) -> None:
        """Release what the memory holds (idempotent)."""
        ...


class AsyncMemoryAPI(Protocol):
    """``MemoryAPI``, awaited."""

    async def add(
        self,
        messages: MessageLike | Iterable[MessageLike],
        user_id: str,
        session_id: str | None = None,
    ) -> AddResult: ...

    async def search(
        self,
        query: str,
        user_id: str,
        k: int | None = None,
        filters: SearchFilters | None = None,
        session_id: str | None = None,
    ) -> list[SearchHit]: ...

    async def context(
        self,
        query: str,
        user_id: str,
        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
        session_id: str | None = None,
        filters: SearchFilters | None = None,
        k: int | None = None,
        expand: bool = True,
    ) -> DeliveredContext: ...

    async def answer(
        self,
        query: str,
        user_id: str,
        session_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> AnswerResult: ...

    async def source_turns(self, hits: Iterable[SearchHit], user_id: str) -> dict[str, Turn]: ...

    async def working_memory(
        self, user_id: str, session_id: str | None = None
    ) -> tuple[Turn, ...]: ...

    async def get(self, memory_id: str, user_id: str) -> MemoryEntry: ...

    async def get_all(
        self, user_id: str, filters: SearchFilters | None = None
    ) -> list[MemoryEntry]: ...

    async def update(self, memory_id: str, text: str, user_id: str) -> MemoryEntry: ...

    async def delete(self, memory_id: str, user_id: str) -> None: ...

    async def history(self, memory_id: str, user_id: str) -> list[AuditEvent]: ...

    async def forget_user(self, user_id: str) -> ForgetReport: ...

    async def consolidate_now(self, user_id: str | None = None) -> ConsolidationReport: ...

    async def consolidation_state(self) -> SchedulerState: ...

    async def knowledge_history(self, item_id: str) -> list[LTMAuditEvent]: ...

    async def check_writable(self) -> None: ...

    async def close(self) -> None: ...


if TYPE_CHECKING:  # mypy checks that each face is its declaration; nothing runs here
    from tiermem.async_memory import AsyncMemory
    from tiermem.memory import Memory
    from tiermem.remote import AsyncRemoteMemory, RemoteMemory

    def _faces(
        m: Memory, r: RemoteMemory, a: AsyncMemory, ar: AsyncRemoteMemory
    ) -> tuple[MemoryAPI, MemoryAPI, AsyncMemoryAPI, AsyncMemoryAPI]:
        return m, r, a, ar


__all__ = ["AsyncMemoryAPI", "MemoryAPI"]
