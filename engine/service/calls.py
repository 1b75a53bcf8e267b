"""The client side of the wire, written once for both faces of ``tiermem.remote``: each
method of the client API as a validated request (``Calls``), and its answer as the result or
the exception ``Memory`` would have raised (``result``). No I/O here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from tiermem.clock import SystemClock
from tiermem.context import DEFAULT_BUDGET_TOKENS, DeliveredContext
from tiermem.errors import ServiceUnavailableError, TiermemError
from tiermem.memory import ForgetReport
from tiermem.service.codes import exception_from
from tiermem.service.wire import decode, encode, filters_json, messages_json
from tiermem.types import (
    AddResult,
    AnswerResult,
    AuditEvent,
    MemoryEntry,
    SearchFilters,
    SearchHit,
    Turn,
)
from tiermem.validation import (
    MessageLike,
    normalize_messages,
    validate_filters,
    validate_hits,
    validate_k,
    validate_memory_id,
    validate_memory_text,
    validate_session_id,
    validate_text,
    validate_user_id,
)

DEFAULT_TIMEOUT_S = 120.0  # a model-backed answer on a busy box
CONSOLIDATION_TIMEOUT_S = 3600.0  # a run consolidates every user's new entries


@dataclass(frozen=True, slots=True)
class Call:
    """One request and what its answer decodes to (``None``: no body)."""

    method: str
    path: str
    params: Mapping[str, Any] | None = None
    body: object = None
    result: Any = None
    long: bool = False


def _segment(value: str) -> str:
    """``value`` as one path segment: every reserved character escaped, and a segment of
    dots too (a client would resolve ``..`` against the path)."""
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if set(quoted) == {"."} else quoted


def _session(session_id: str | None) -> str | None:
    return None if session_id is None else validate_session_id(session_id)


def _filters_param(filters: SearchFilters | None) -> dict[str, Any]:
    data = filters_json(validate_filters(filters)) or {}
    return {k: v for k, v in data.items() if v not in (None, [], False)}


class Calls:
    """Each method of the client API (``tiermem.api.MemoryAPI``, the same parameters and
    defaults) as a validated ``Call``."""

    @staticmethod
    def add(
        messages: MessageLike | Iterable[MessageLike], user_id: str, session_id: str | None = None
    ) -> Call:
        uid, sid = validate_user_id(user_id), validate_session_id(session_id)
        if not isinstance(messages, str | Mapping) and isinstance(messages, Iterable):
            messages = list(messages)  # an iterator is read once: to check and to send
        normalize_messages(messages, uid, sid, SystemClock().now())  # Memory's checks, here
        body = {"messages": messages_json(messages), "user_id": uid, "session_id": session_id}
        return Call("POST", "/v1/memories", body=body, result=AddResult)

    @staticmethod
    def search(
        query: str,
        user_id: str,
        k: int | None = None,
        filters: SearchFilters | None = None,
        session_id: str | None = None,
    ) -> Call:
        body = {
            "query": validate_text(query),
            "user_id": validate_user_id(user_id),
            "k": None if k is None else validate_k(k),
            "filters": filters_json(validate_filters(filters)),
            "session_id": _session(session_id),
        }
        return Call("POST", "/v1/search", body=body, result=list[SearchHit])

    @staticmethod
    def context(
        query: str,
        user_id: str,
        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
        session_id: str | None = None,
        filters: SearchFilters | None = None,
        k: int | None = None,
        expand: bool = True,
    ) -> Call:
        body = {
            "query": validate_text(query),
            "user_id": validate_user_id(user_id),
            "budget_tokens": validate_k(budget_tokens, "budget_tokens"),
            "session_id": _session(session_id),
            "filters": filters_json(validate_filters(filters)),
            "k": None if k is None else validate_k(k),
            "expand": bool(expand),
        }
        return Call("POST", "/v1/context", body=body, result=DeliveredContext)

    @staticmethod
    def answer(
        query: str,
        user_id: str,
        session_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> Call:
        body = {
            "query": validate_text(query),
            "user_id": validate_user_id(user_id),
            "session_id": _session(session_id),
            "filters": filters_json(validate_filters(filters)),
        }
        return Call("POST", "/v1/answer", body=body, result=AnswerResult)

    @staticmethod
    def source_turns(hits: Iterable[SearchHit], user_id: str) -> Call:
        body = {
            "hits": encode(validate_hits(hits), list[SearchHit]),
            "user_id": validate_user_id(user_id),
        }
        return Call("POST", "/v1/source-turns", body=body, result=dict[str, Turn])

    @staticmethod
    def working_memory(user_id: str, session_id: str | None = None) -> Call:
        params = {"user_id": validate_user_id(user_id)}
        if session_id is not None:
            params["session_id"] = validate_session_id(session_id)
        return Call("GET", "/v1/working-memory", params, result=tuple[Turn, ...])

    @staticmethod
    def _memory(method: str, memory_id: str, user_id: str, suffix: str = "") -> Call:
        uid = validate_user_id(user_id)
        path = f"/v1/memories/{_segment(validate_memory_id(memory_id, uid))}{suffix}"
        return Call(method, path, {"user_id": uid})

    @staticmethod
    def get(memory_id: str, user_id: str) -> Call:
        call = Calls._memory("GET", memory_id, user_id)
        return Call(call.method, call.path, call.params, result=MemoryEntry)

    @staticmethod
    def get_all(user_id: str, filters: SearchFilters | None = None) -> Call:
        params = {"user_id": validate_user_id(user_id), **_filters_param(filters)}
        return Call("GET", "/v1/memories", params, result=list[MemoryEntry])

    @staticmethod
    def update(memory_id: str, text: str, user_id: str) -> Call:
        call = Calls._memory("PATCH", memory_id, user_id)
        body = {"text": validate_memory_text(text), "user_id": validate_user_id(user_id)}
        return Call("PATCH", call.path, body=body, result=MemoryEntry)

    @staticmethod
    def delete(memory_id: str, user_id: str) -> Call:
        return Calls._memory("DELETE", memory_id, user_id)

    @staticmethod
    def history(memory_id: str, user_id: str) -> Call:
        call = Calls._memory("GET", memory_id, user_id, "/history")
        return Call(call.method, call.path, call.params, result=list[AuditEvent])

    @staticmethod
    def forget_user(user_id: str) -> Call:
        path = f"/v1/users/{_segment(validate_user_id(user_id))}"
        return Call("DELETE", path, result=ForgetReport)

    @staticmethod
    def consolidate_now(user_id: str | None = None) -> Call:
        from tiermem.offline.consolidate import ConsolidationReport

        body = {"user_id": None if user_id is None else validate_user_id(user_id)}
        return Call(
            "POST", "/v1/consolidation/run", body=body, result=ConsolidationReport, long=True
        )

    @staticmethod
    def consolidation_state() -> Call:
        from tiermem.offline.scheduler import SchedulerState

        return Call("GET", "/v1/consolidation", result=SchedulerState)

    @staticmethod
    def check_writable() -> Call:
        return Call("GET", "/readyz")

    @staticmethod
    def knowledge_history(item_id: str) -> Call:
        from tiermem.journal import LTMAuditEvent

        path = f"/v1/knowledge/{_segment(validate_memory_id(item_id, 'ltm'))}/history"
        return Call("GET", path, result=list[LTMAuditEvent])


def request_args(call: Call, api_key: str, timeout_s: float) -> dict[str, Any]:
    """The keyword arguments of ``httpx.Client.request`` for ``call``, but its URL."""
    args: dict[str, Any] = {
        "params": call.params,
        "headers": {"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
        "timeout": max(timeout_s, CONSOLIDATION_TIMEOUT_S) if call.long else timeout_s,
    }
    if call.body is not None:
        # escaped to ASCII: the body is valid JSON whatever text it holds
        args["content"] = json.dumps(call.body, ensure_ascii=True, allow_nan=False)
        args["headers"]["Content-Type"] = "application/json"
    return args


def outcome(call: Call, response: httpx.Response) -> Any:
    if response.is_success:
        return None if call.result is None else decode(response.json(), call.result)
    try:
        body: object = response.json()
    except ValueError:
        body = response.text
    raise exception_from(body, response.status_code)


def unreachable(url: str, exc: httpx.TransportError) -> TiermemError:
    return ServiceUnavailableError(f"tiermem service at {url}: {type(exc).__name__}: {exc}")
