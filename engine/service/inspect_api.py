"""What the inspector page needs that ``Memory``'s client API has no route for, under
``/v1/inspect``: behind the same keys (``ApiGate``) and the same tenancy as every ``/v1``
route, and reading only.

- ``GET /v1/inspect/users``: the caller's tenant's users, and what the service allows it.
- ``POST /v1/inspect/context`` / ``answer``: the context ``context()`` / ``answer()`` builds,
  unit by unit (``tiermem.service.trace``), with the answer and its refusal.
- ``GET /v1/inspect/knowledge?user_id=``: the LTM items that user's memories fed, found by
  their keyed provenance alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from fastapi import APIRouter, Request, Response
from tiermem.service import wire
from tiermem.service.routes import (
    ERRORS,
    Caller,
    JSONBody,
    Service,
    UserParam,
    check_k,
    reply,
    scope,
)
from tiermem.service.tenancy import UserScope, tenant_users
from tiermem.service.trace import ContextTrace, ReadRequest, trace_context
from tiermem.types import LTM_ID_PREFIX
from tiermem.validation import validate_text


@dataclass(frozen=True, slots=True)
class InspectorInfo:
    """Whom the key belongs to, its tenant's users, and what the page may offer."""

    tenant: str  # "" for an embedded directory's owner (``tiermem inspect``)
    admin: bool
    read_only: bool
    ltm: bool
    users: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FedKnowledge:
    """One shared LTM item that some of the user's memories support: ``from_user`` of its
    ``evidence`` supporting entries are this user's (the rest are other users', and nothing
    else of them is shown)."""

    id: str
    text: str
    kind: str
    evidence: int
    from_user: int
    confidence: float
    last_supported: datetime


@dataclass(frozen=True, slots=True)
class UserKnowledge:
    """``enabled``: whether this service keeps an LTM at all."""

    enabled: bool
    items: tuple[FedKnowledge, ...] = ()


def inspect_router(service: Service) -> APIRouter:
    """The inspector's routes over ``service.memory``."""
    memory, limits = service.memory, service.config
    router = APIRouter(
        prefix="/v1/inspect", default_response_class=JSONBody, responses=ERRORS, tags=["inspect"]
    )

    def traced(user: UserScope, request: ReadRequest) -> Response:
        validate_text(request.query, limit=limits.max_query_chars)
        return reply(user, trace_context(memory, request), ContextTrace)

    @router.get("/users", response_model=InspectorInfo)
    def users(caller: Caller) -> Response:
        """The users of the key's tenant (those with stored turns or audit rows)."""
        stored = memory.components.journal.user_ids()
        info = InspectorInfo(
            caller.name,
            caller.admin,
            service.read_only,
            memory.components.ltm is not None,
            tuple(tenant_users(caller.name, stored)),
        )
        return reply(None, info, InspectorInfo)

    @router.post("/context", response_model=ContextTrace)
    def context(body: wire.ContextRequest, request: Request, caller: Caller) -> Response:
        """The context ``Memory.context`` builds, unit by unit: each unit's hit and score
        explanation, its tokens, and why it was kept or cut. Counts no retrieval."""
        user = scope(request, caller, body.user_id)
        check_k("k", body.k, limits.max_k)
        check_k("budget_tokens", body.budget_tokens, limits.max_budget_tokens)
        read = ReadRequest(
            body.query,
            user.stored,
            body.budget_tokens,
            body.k,
            body.expand,
            body.session_id,
            wire.filters_from(body.filters),
        )
        return traced(user, read)

    @router.post("/answer", response_model=ContextTrace)
    def answer(body: wire.AnswerRequest, request: Request, caller: Caller) -> Response:
        """What ``Memory.answer`` reads, unit by unit, its text, and why it refused, if it
        did. Counts no retrieval."""
        user = scope(request, caller, body.user_id)
        read = ReadRequest(
            body.query,
            user.stored,
            session_id=body.session_id,
            filters=wire.filters_from(body.filters),
            for_answer=True,
        )
        return traced(user, read)

    @router.get("/knowledge", response_model=UserKnowledge)
    def knowledge(request: Request, caller: Caller, user_id: UserParam) -> Response:
        """The shared LTM items this user's memories fed, with their evidence and
        confidence now; ``enabled`` false when the service keeps no LTM."""
        user = scope(request, caller, user_id)
        c = memory.components
        if c.ltm is None:
            return reply(user, UserKnowledge(False), UserKnowledge)
        keys = c.ltm.provenance.entry_keys(user.stored, c.journal.memory_ids(user.stored))
        items = tuple(
            FedKnowledge(
                LTM_ID_PREFIX + fact.id,
                fact.text,
                fact.kind,
                fact.evidence,
                mine,
                fact.confidence.value,
                fact.last_supported,
            )
            for fact, mine in c.ltm.supported_by(keys, c.clock.now())
        )
        return reply(user, UserKnowledge(True, items), UserKnowledge)

    return router
