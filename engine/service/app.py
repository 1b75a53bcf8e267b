"""The FastAPI application: ``create_app(memory, keys, config)``.

The app serves a memory it does not own; whoever built it may pass ``close`` to have it closed
when the server shuts down: after the requests in flight have finished (uvicorn drains them
before the lifespan ends), so every acknowledged write is in before the stores close.

Errors: a ``TiermemError`` answers with its code and status (``tiermem.service.codes``); a
body or parameter that fails the schema with 422 ``invalid_request``; an unknown route with
404 ``not_found``; anything else is a bug, logged, and answered 500 ``internal_error``
without its details.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from tiermem import __version__
from tiermem.errors import (
    SHOWN_CHARS,
    PermissionDeniedError,
    RequestTimeoutError,
    RequestTooLargeError,
    TiermemError,
    shown,
)
from tiermem.memory import Memory
from tiermem.service.codes import error_body, protocol_body, status_of
from tiermem.service.config import ServiceConfig
from tiermem.service.inspect_api import inspect_router
from tiermem.service.keys import KeyLookup
from tiermem.service.limits import RETRY_AFTER_S, RETRY_STATUSES, ApiGate, authenticate
from tiermem.service.metrics import CONTENT_TYPE, RequestTimer, ServiceMetrics
from tiermem.service.page import page_router
from tiermem.service.routes import JSONBody, Service, api_router

logger = logging.getLogger(__name__)

READY_PROBE = "readyz"  # a user id no tenant's can equal (those hold "tenant:")
_PROTOCOL = {400: "invalid_request", 404: "not_found", 405: "method_not_allowed"}


def create_app(
    memory: Memory,
    keys: KeyLookup,
    config: ServiceConfig | None = None,
    *,
    close: Callable[[], None] | None = None,
    read_only: bool = False,
) -> FastAPI:
    """The service over ``memory``: the ``/v1`` API, the inspector page (``/inspect``),
    ``/healthz``, ``/readyz``, ``/metrics``. ``close`` runs (in a worker thread) when the
    server shuts down; ``read_only`` refuses every write (``tiermem inspect``)."""
    config = config or ServiceConfig()
    service = Service(memory, keys, config, read_only)
    metrics = ServiceMetrics(memory)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # every request in flight holds a worker thread: never fewer threads than requests
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = max(limiter.total_tokens, config.max_in_flight + 4)
        yield
        if close is not None:
            await anyio.to_thread.run_sync(close)

    app = FastAPI(
        title="tiermem",
        version=__version__,
        summary="Tiered memory for LLM agents: Memory's client API over HTTP, per tenant.",
        default_response_class=JSONBody,
        lifespan=lifespan,
    )
    app.include_router(api_router(service))
    app.include_router(inspect_router(service))
    app.include_router(page_router())
    _add_error_handlers(app)
    _add_operations(app, memory, metrics, keys, config)
    app.add_middleware(
        ApiGate,
        keys=keys,
        max_body_bytes=config.max_body_bytes,
        max_in_flight=config.max_in_flight,
        tenant_share=config.tenant_share,
        body_timeout_s=config.body_timeout_s,
    )
    app.add_middleware(RequestTimer, metrics=metrics)  # outermost: times refusals too
    return app


def _caller_body(request: Request, body: dict[str, object]) -> dict[str, object]:
    scope = getattr(request.state, "scope", None)
    return body if scope is None else scope.to_caller(body)


def _problem(error: Mapping[str, Any]) -> str:
    """One schema error as the answer says it: where (each part of the path cut as an error
    message cuts a value: a field name can be the caller's 200,000 characters) and what."""
    where = ".".join(
        str(p) if len(str(p)) <= SHOWN_CHARS else shown(str(p)) for p in error.get("loc", ())
    )
    return f"{where}: {str(error.get('msg', ''))[: SHOWN_CHARS * 4]}"


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(TiermemError)
    async def tiermem_error(request: Request, exc: TiermemError) -> Response:
        status = status_of(exc)
        if status >= 500:
            logger.warning("%s %s: %s", request.method, request.url.path, type(exc).__name__)
        headers = {"Retry-After": str(RETRY_AFTER_S)} if status in RETRY_STATUSES else {}
        if status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        return JSONBody(_caller_body(request, error_body(exc)), status, headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(_problem(e) for e in exc.errors()[:5])
        return JSONBody(protocol_body("invalid_request", problems), 422)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 413:
            return JSONBody(error_body(RequestTooLargeError(str(exc.detail))), 413)
        if exc.status_code == 408:
            return JSONBody(error_body(RequestTimeoutError(str(exc.detail))), 408)
        code = _PROTOCOL.get(exc.status_code, "http_error")
        return JSONBody(protocol_body(code, str(exc.detail)), exc.status_code, exc.headers)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> Response:
        logger.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return JSONBody(protocol_body("internal_error", "internal error; see the log"), 500)


def _add_operations(
    app: FastAPI, memory: Memory, metrics: ServiceMetrics, keys: KeyLookup, config: ServiceConfig
) -> None:
    """``/healthz`` and ``/readyz`` answer anyone (probes carry no key); ``/metrics`` needs an
    admin key unless the configuration makes it public. ``/docs`` and ``/openapi.json``
    describe the API, the same for every deployment, and hold no data: public."""

    @app.get("/healthz", tags=["operations"])
    def healthz() -> dict[str, str]:
        """The process is up."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["operations"], responses={503: {"description": "not ready"}})
    def readyz() -> Response:
        """The memory is open, its store answers, the store and the journal can take a
        write now (a full or read-only disk is not ready), and nothing a failure left
        unfinished is in the way of the next write: send traffic."""
        try:
            memory.components.store.count(READY_PROBE)
            memory.check_writable()  # also finishes what a failure left, as a write would
        except TiermemError as exc:  # a store down, a full disk, closing
            # the error shape too: a client re-raises the same typed error
            body = {"status": "not ready", "reason": type(exc).__name__, **error_body(exc)}
            return JSONBody(body, 503, {"Retry-After": str(RETRY_AFTER_S)})
        return JSONBody({"status": "ready"})

    @app.get("/metrics", tags=["operations"], response_class=Response)
    def prometheus(request: Request) -> Response:
        """Prometheus text format; with an admin key (``Authorization: Bearer``) unless
        ``[service] public_metrics`` is on."""
        if not config.public_metrics and not authenticate(keys, request.scope).admin:
            raise PermissionDeniedError("/metrics needs an admin key")
        return Response(metrics.render(), media_type=CONTENT_TYPE)
