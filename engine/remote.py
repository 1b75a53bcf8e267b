"""``RemoteMemory`` and ``AsyncRemoteMemory``: ``Memory``'s client API against a ``tiermem
serve`` service, over HTTP (httpx). Same methods, same arguments, same result types, same
exceptions: an error the service answers is raised again as the class ``Memory`` would raise.

Arguments are validated here first, by the very checks ``Memory`` runs, so a bad argument
raises the same typed error before anything is sent. Errors of the service itself are
``ServiceError``s: ``AuthenticationError`` (401), ``PermissionDeniedError`` (403),
``RequestTooLargeError`` (413), ``ServiceOverloadedError`` and ``ServiceUnavailableError``
(503, or the service cannot be reached).

>>> memory = RemoteMemory("http://127.0.0.1:8080", api_key="tmk_...")  # doctest: +SKIP
>>> memory.add("My sister Ana lives in Lisbon.", user_id="alice")  # doctest: +SKIP
>>> memory.search("where does my sister live", user_id="alice", k=1)[0].text  # doctest: +SKIP
'user: My sister Ana lives in Lisbon.'

The logic of each call is written once (``tiermem.service.calls``: validate, then build the
request and name the result type); the two faces only send it, one blocking, one awaited.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any

import httpx
from tiermem.context import DEFAULT_BUDGET_TOKENS, DeliveredContext
from tiermem.memory import ForgetReport
from tiermem.service.calls import (
    DEFAULT_TIMEOUT_S,
    Call,
    Calls,
    outcome,
    request_args,
    unreachable,
)
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


class RemoteMemory:
    """``Memory`` over HTTP: a ``tiermem serve`` service at ``url``, as the tenant of
    ``api_key``. Thread-safe (one pooled ``httpx.Client``); pass ``client`` to configure the
    transport (TLS, proxies, retries) yourself."""

    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        client: httpx.Client | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._owns_client = client is None
        self._api_key = api_key
        self._http = client or httpx.Client()

    def _run(self, call: Call) -> Any:
        try:
            args = request_args(call, self._api_key, self.timeout_s)
            response = self._http.request(call.method, self.url + call.path, **args)
        except httpx.TransportError as exc:
            raise unreachable(self.url, exc) from exc
        return outcome(call, response)

    def add(
        self,
        messages: MessageLike | Iterable[MessageLike],
        user_id: str,
        session_id: str | None = None,
    ) -> AddResult:
        result: AddResult = self._run(Calls.add(messages, user_id, session_id))
        return result

    def search(
        self,
        query: str,
        user_id: str,
        k: int | None = None,
        filters: SearchFilters | None = None,
        session_id: str | None = None,
    ) -> list[SearchHit]:
        result: list[SearchHit] = self._run(Calls.search(query, user_id, k, filters, session_id))
        return result

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
        call = Calls.context(query, user_id, budget_tokens, session_id, filters, k, expand)
        result: DeliveredContext = self._run(call)
        return result

    def answer(
        self,
        query: str,
        user_id: str,
        session_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> AnswerResult:
        result: AnswerResult = self._run(Calls.answer(query, user_id, session_id, filters))
        return result

    def source_turns(self, hits: Iterable[SearchHit], user_id: str) -> dict[str, Turn]:
        result: dict[str, Turn] = self._run(Calls.source_turns(hits, user_id))
        return result

    def working_memory(self, user_id: str, session_id: str | None = None) -> tuple[Turn, ...]:
        result: tuple[Turn, ...] = self._run(Calls.working_memory(user_id, session_id))
        return result

    def get(self, memory_id: str, user_id: str) -> MemoryEntry:
        result: MemoryEntry = self._run(Calls.get(memory_id, user_id))
        return result

    def get_all(self, user_id: str, filters: SearchFilters | None = None) -> list[MemoryEntry]:
        result: list[MemoryEntry] = self._run(Calls.get_all(user_id, filters))
        return result

    def update(self, memory_id: str, text: str, user_id: str) -> MemoryEntry:
        result: MemoryEntry = self._run(Calls.update(memory_id, text, user_id))
        return result

    def delete(self, memory_id: str, user_id: str) -> None:
        self._run(Calls.delete(memory_id, user_id))

    def history(self, memory_id: str, user_id: str) -> list[AuditEvent]:
        result: list[AuditEvent] = self._run(Calls.history(memory_id, user_id))
        return result

    def forget_user(self, user_id: str) -> ForgetReport:
        result: ForgetReport = self._run(Calls.forget_user(user_id))
        return result

    def consolidate_now(self, user_id: str | None = None) -> ConsolidationReport:
        result: ConsolidationReport = self._run(Calls.consolidate_now(user_id))
        return result

    def consolidation_state(self) -> SchedulerState:
        result: SchedulerState = self._run(Calls.consolidation_state())
        return result

    def knowledge_history(self, item_id: str) -> list[LTMAuditEvent]:
        result: list[LTMAuditEvent] = self._run(Calls.knowledge_history(item_id))
        return result

    def check_writable(self) -> None:
        """The service's ``/readyz``: the typed error a write would meet now, else nothing."""
        self._run(Calls.check_writable())

    def close(self) -> None:
        """Close the connection pool (a client passed in stays open). Idempotent."""
        if self._owns_client:
            self._http.close()

    def __enter__(self) -> RemoteMemory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncRemoteMemory:
    """``AsyncMemory`` over HTTP: ``RemoteMemory``'s calls, awaited on an
    ``httpx.AsyncClient`` (no thread per call)."""

    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._owns_client = client is None
        self._api_key = api_key
        self._http = client or httpx.AsyncClient()

    async def _run(self, call: Call) -> Any:
        try:
            args = request_args(call, self._api_key, self.timeout_s)
            response = await self._http.request(call.method, self.url + call.path, **args)
        except httpx.TransportError as exc:
            raise unreachable(self.url, exc) from exc
        return outcome(call, response)

    async def add(
        self,
        messages: MessageLike | Iterable[MessageLike],
        user_id: str,
        session_id: str | None = None,
    ) -> AddResult:
        result: AddResult = await self._run(Calls.add(messages, user_id, session_id))
        return result

    async def search(
        self,
        query: str,
        user_id: str,
        k: int | None = None,
        filters: SearchFilters | None = None,
        session_id: str | None = None,
    ) -> list[SearchHit]:
        call = Calls.search(query, user_id, k, filters, session_id)
        result: list[SearchHit] = await self._run(call)
        return result

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
        call = Calls.context(query, user_id, budget_tokens, session_id, filters, k, expand)
        result: DeliveredContext = await self._run(call)
        return result

    async def answer(
        self,
        query: str,
        user_id: str,
        session_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> AnswerResult:
        result: AnswerResult = await self._run(Calls.answer(query, user_id, session_id, filters))
        return result

    async def source_turns(self, hits: Iterable[SearchHit], user_id: str) -> dict[str, Turn]:
        result: dict[str, Turn] = await self._run(Calls.source_turns(hits, user_id))
        return result

    async def working_memory(self, user_id: str, session_id: str | None = None) -> tuple[Turn, ...]:
        result: tuple[Turn, ...] = await self._run(Calls.working_memory(user_id, session_id))
        return result

    async def get(self, memory_id: str, user_id: str) -> MemoryEntry:
        result: MemoryEntry = await self._run(Calls.get(memory_id, user_id))
        return result

    async def get_all(
        self, user_id: str, filters: SearchFilters | None = None
    ) -> list[MemoryEntry]:
        result: list[MemoryEntry] = await self._run(Calls.get_all(user_id, filters))
        return result

    async def update(self, memory_id: str, text: str, user_id: str) -> MemoryEntry:
        result: MemoryEntry = await self._run(Calls.update(memory_id, text, user_id))
        return result

    async def delete(self, memory_id: str, user_id: str) -> None:
        await self._run(Calls.delete(memory_id, user_id))

    async def history(self, memory_id: str, user_id: str) -> list[AuditEvent]:
        result: list[AuditEvent] = await self._run(Calls.history(memory_id, user_id))
        return result

    async def forget_user(self, user_id: str) -> ForgetReport:
        result: ForgetReport = await self._run(Calls.forget_user(user_id))
        return result

    async def consolidate_now(self, user_id: str | None = None) -> ConsolidationReport:
        result: ConsolidationReport = await self._run(Calls.consolidate_now(user_id))
        return result

    async def consolidation_state(self) -> SchedulerState:
        result: SchedulerState = await self._run(Calls.consolidation_state())
        return result

    async def knowledge_history(self, item_id: str) -> list[LTMAuditEvent]:
        result: list[LTMAuditEvent] = await self._run(Calls.knowledge_history(item_id))
        return result

    async def check_writable(self) -> None:
        await self._run(Calls.check_writable())

    async def close(self) -> None:
        """Close the connection pool (a client passed in stays open). Idempotent."""
        if self._owns_client:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncRemoteMemory:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
