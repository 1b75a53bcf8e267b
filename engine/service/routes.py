"""The ``/v1`` routes: ``Memory``'s client API, one route per method, each tenant's users
scoped (``tiermem.service.tenancy``). Handlers are plain functions: FastAPI runs them in its
thread pool, and ``Memory`` is thread-safe.

Every argument is checked against the service's limits and then by ``Memory`` itself, so an
input error is the same typed error, with the same code, whichever face raised it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from tiermem.context import DeliveredContext
from tiermem.errors import (
    AuthenticationError,
    InvalidLimitError,
    InvalidMessageError,
    PermissionDeniedError,
)
from tiermem.journal import LTMAuditEvent
from tiermem.memory import ForgetReport, Memory
from tiermem.offline.consolidate import ConsolidationReport
from tiermem.offline.scheduler import SchedulerState
from tiermem.service import wire
from tiermem.service.config import ServiceConfig
from tiermem.service.keys import KeyLookup, Tenant
from tiermem.service.tenancy import UserScope
from tiermem.types import AddResult, AnswerResult, AuditEvent, MemoryEntry, SearchHit, Turn
from tiermem.validation import MAX_MEMORY_TEXT_CHARS, is_blank, validate_text


class JSONBody(JSONResponse):
    """JSON with non-ASCII escaped: an error may echo a lone surrogate the caller sent, which
    UTF-8 cannot carry but a JSON escape can."""

    def render(self, content: Any) -> bytes:
        import json

        return json.dumps(content, ensure_ascii=True, allow_nan=False).encode()


@dataclass(frozen=True, slots=True)
class Service:
    """What the routes serve: one memory, its tenants' keys, the limits. ``read_only``
    (``tiermem inspect``): every write is refused (403) before it reaches the memory."""

    memory: Memory
    keys: KeyLookup
    config: ServiceConfig
    read_only: bool = False


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": wire.ErrorBody, "description": what}
    for status, what in (
        (401, "no API key, or an unknown one"),
        (403, "a service-wide operation with a key that is not an admin's"),
        (404, "no such memory for this user (another tenant's memory is not found either)"),
        (409, "the service's configuration does not allow it (e.g. LTM is off)"),
        (413, "the body is over the service's limit"),
        (422, "the input is invalid: the same typed error Memory raises"),
        (503, "overloaded (Retry-After), shutting down, or a store is down"),
    )
}
_bearer = HTTPBearer(auto_error=False, description="an API key from `tiermem keys add`")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def caller_tenant(request: Request, credentials: Credentials) -> Tenant:
    """The tenant that ``ApiGate`` found for the request's API key (it answered 401 before
    any body was read when there was none). ``credentials`` puts the scheme in the OpenAPI
    document."""
    tenant = getattr(request.state, "tenant", None)
    if not isinstance(tenant, Tenant):
        raise AuthenticationError("no API key: send the header Authorization: Bearer <key>")
    return tenant


Caller = Annotated[Tenant, Depends(caller_tenant)]
UserParam = Annotated[str, Query(json_schema_extra=wire.ID_RULES)]
SessionParam = Annotated[str | None, Query(json_schema_extra=wire.ID_RULES)]
UserPath = Annotated[str, Path(json_schema_extra=wire.ID_RULES)]


def scope(request: Request, caller: Tenant, user_id: object) -> UserScope:
    """The request's user, scoped to the caller's tenant."""
    scoped = UserScope.of(caller.name, user_id)
    request.state.scope = scoped  # so an error names the caller's user id, not the stored
    return scoped


def reply(user: UserScope | None, value: object, kind: Any) -> JSONBody:
    """``value`` (a ``kind``) as JSON, naming ``user`` as the caller does."""
    data = wire.encode(value, kind)
    return JSONBody(data if user is None else user.to_caller(data))


def check_k(name: str, value: int | None, maximum: int) -> None:
    """``InvalidLimitError`` past the service's own limit (``Memory`` checks the rest)."""
    if value is not None and value > maximum:
        raise InvalidLimitError(name, value, maximum)


def api_router(service: Service) -> APIRouter:
    """The routes over ``service.memory``, behind ``ApiGate`` (``service.keys``)."""
    memory, limits = service.memory, service.config

    def query_text(text: str) -> None:
        validate_text(text, limit=limits.max_query_chars)

    def writable(what: str) -> None:
        if service.read_only:
            raise PermissionDeniedError(f"{what}: this inspector serves the memory read-only")

    router = APIRouter(prefix="/v1", default_response_class=JSONBody, responses=ERRORS)

    @router.post("/memories", response_model=AddResult, tags=["memories"])
    def add(body: wire.AddRequest, request: Request, caller: Caller) -> Response:
        """``Memory.add``: remember an exchange."""
        writable("add")
        user = scope(request, caller, body.user_id)
        messages = [body.messages] if isinstance(body.messages, str) else body.messages
        if len(messages) > limits.max_messages:
            raise InvalidLimitError("messages", len(messages), limits.max_messages)
        for index, message in enumerate(messages):
            content = message if isinstance(message, str) else message.content
            if (
                content is not None
                and not is_blank(content)
                and len(content) > limits.max_text_chars
            ):
                raise InvalidMessageError(
                    index, f"content exceeds {limits.max_text_chars} characters"
                )
        result = memory.add(wire.messages_from(body.messages), user.stored, body.session_id)
        return reply(user, result, AddResult)

    @router.post("/search", response_model=list[SearchHit], tags=["reads"])
    def search(body: wire.SearchRequest, request: Request, caller: Caller) -> Response:
        """``Memory.search``: the user's memories most relevant to the query."""
        user = scope(request, caller, body.user_id)
        check_k("k", body.k, limits.max_k)
        query_text(body.query)
        filters = wire.filters_from(body.filters)
        hits = memory.search(body.query, user.stored, body.k, filters, body.session_id)
        return reply(user, hits, list[SearchHit])

    @router.post("/context", response_model=DeliveredContext, tags=["reads"])
    def context(body: wire.ContextRequest, request: Request, caller: Caller) -> Response:
        """``Memory.context``: what a generator should read, within a token budget."""
        user = scope(request, caller, body.user_id)
        check_k("k", body.k, limits.max_k)
        check_k("budget_tokens", body.budget_tokens, limits.max_budget_tokens)
        query_text(body.query)
        delivered = memory.context(
            body.query,
            user.stored,
            body.budget_tokens,
            body.session_id,
            wire.filters_from(body.filters),
            body.k,
            body.expand,
        )
        return reply(user, delivered, DeliveredContext)

    @router.post("/answer", response_model=AnswerResult, tags=["reads"])
    def answer(body: wire.AnswerRequest, request: Request, caller: Caller) -> Response:
        """``Memory.answer``: answer from memory."""
        user = scope(request, caller, body.user_id)
        query_text(body.query)
        filters = wire.filters_from(body.filters)
        return reply(
            user, memory.answer(body.query, user.stored, body.session_id, filters), AnswerResult
        )

    @router.post("/source-turns", response_model=dict[str, Turn], tags=["reads"])
    def source_turns(body: wire.SourceTurnsRequest, request: Request, caller: Caller) -> Response:
        """``Memory.source_turns``: the stored turns behind these hits, by turn id."""
        user = scope(request, caller, body.user_id)
        check_k("hits", len(body.hits), limits.max_k)
        return reply(user, memory.source_turns(body.hits, user.stored), dict[str, Turn])

    @router.get("/working-memory", response_model=list[Turn], tags=["reads"])
    def working_memory(
        request: Request, caller: Caller, user_id: UserParam, session_id: SessionParam = None
    ) -> Response:
        """``Memory.working_memory``: the session's STM window, oldest first."""
        user = scope(request, caller, user_id)
        return reply(user, memory.working_memory(user.stored, session_id), tuple[Turn, ...])

    @router.get("/memories/{memory_id:path}/history", response_model=list[AuditEvent])
    def history(memory_id: str, request: Request, caller: Caller, user_id: UserParam) -> Response:
        """``Memory.history``: every change to one entry, oldest first."""
        user = scope(request, caller, user_id)
        return reply(user, memory.history(memory_id, user.stored), list[AuditEvent])

    @router.get("/memories/{memory_id:path}", response_model=MemoryEntry, tags=["memories"])
    def get(memory_id: str, request: Request, caller: Caller, user_id: UserParam) -> Response:
        """``Memory.get``: one entry of this user (404 if this user has none such)."""
        user = scope(request, caller, user_id)
        return reply(user, memory.get(memory_id, user.stored), MemoryEntry)

    @router.get("/memories", response_model=list[MemoryEntry], tags=["memories"])
    def get_all(
        request: Request,
        caller: Caller,
        user_id: UserParam,
        since: str | None = None,
        until: str | None = None,
        kinds: Annotated[list[str] | None, Query()] = None,
        session_id: SessionParam = None,
        include_superseded: bool = False,
    ) -> Response:
        """``Memory.get_all``: every entry of this user matching the filters, oldest first."""
        user = scope(request, caller, user_id)
        filters = wire.FiltersIn(
            since=since,
            until=until,
            kinds=kinds or [],
            session_id=session_id,
            include_superseded=include_superseded,
        )
        entries = memory.get_all(user.stored, wire.filters_from(filters))
        return reply(user, entries, list[MemoryEntry])

    @router.patch("/memories/{memory_id:path}", response_model=MemoryEntry, tags=["memories"])
    def update(
        memory_id: str, body: wire.UpdateRequest, request: Request, caller: Caller
    ) -> Response:
        """``Memory.update``: replace an entry's text; the old text stays in its history."""
        writable("update")
        user = scope(request, caller, body.user_id)
        validate_text(body.text, "memory text", min(limits.max_text_chars, MAX_MEMORY_TEXT_CHARS))
        return reply(user, memory.update(memory_id, body.text, user.stored), MemoryEntry)

    @router.delete("/memories/{memory_id:path}", status_code=204, tags=["memories"])
    def delete(memory_id: str, request: Request, caller: Caller, user_id: UserParam) -> Response:
        """``Memory.delete``: remove an entry (its history keeps it until ``forget_user``)."""
        writable("delete")
        user = scope(request, caller, user_id)
        memory.delete(memory_id, user.stored)
        return Response(status_code=204)

    @router.delete("/users/{user_id:path}", response_model=ForgetReport, tags=["users"])
    def forget_user(user_id: UserPath, request: Request, caller: Caller) -> Response:
        """``Memory.forget_user``: erase this user of this tenant everywhere."""
        writable("forget_user")
        user = scope(request, caller, user_id)
        return reply(user, memory.forget_user(user.stored), ForgetReport)

    @router.get(
        "/knowledge/{item_id:path}/history", response_model=list[LTMAuditEvent], tags=["ltm"]
    )
    def knowledge_history(item_id: str, caller: Caller) -> Response:
        """``Memory.knowledge_history``: every change to one item of the shared, de-identified
        knowledge graph."""
        return reply(None, memory.knowledge_history(item_id), list[LTMAuditEvent])

    @router.get("/consolidation", response_model=SchedulerState, tags=["ltm"])
    def consolidation_state(caller: Caller) -> Response:
        """``Memory.consolidation_state`` (an admin key): the scheduler as it stands."""
        require_admin(caller, "the consolidation scheduler's state")
        return reply(None, memory.consolidation_state(), SchedulerState)

    @router.post("/consolidation/run", response_model=ConsolidationReport, tags=["ltm"])
    def consolidate_now(
        request: Request, caller: Caller, body: wire.ConsolidateRequest | None = None
    ) -> Response:
        """``Memory.consolidate_now``: one user's run now, or every user's (an admin key).
        It runs on the service's own scheduler, after any run in flight."""
        writable("consolidate_now")
        if body is None or body.user_id is None:
            require_admin(caller, "consolidating every user")
            return reply(None, memory.consolidate_now(None), ConsolidationReport)
        user = scope(request, caller, body.user_id)
        return reply(user, memory.consolidate_now(user.stored), ConsolidationReport)

    return router


def require_admin(caller: Tenant, what: str) -> None:
    if not caller.admin:
        raise PermissionDeniedError(f"{what} needs an admin key (tiermem keys add --admin)")
