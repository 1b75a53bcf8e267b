"""The gate of the API (``/v1/``), before a request reaches the memory, in this order: its API
key (401, before any of its body is read), the body size (413, also for a chunked body that
declares no length), the requests in flight (503 with ``Retry-After``), and its tenant's share
of them (429 with ``Retry-After``). A body must arrive whole within ``body_timeout_s`` of the
request's start (else 408): a client that sends headers and then nothing holds its slot that
long at most. Health checks and metrics pass freely: they answer under any load."""

from __future__ import annotations

import json
import math
import time

import anyio
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from tiermem.errors import (
    AuthenticationError,
    RequestTooLargeError,
    ServiceOverloadedError,
    TenantBusyError,
    TiermemError,
)
from tiermem.service.codes import error_body, status_of
from tiermem.service.keys import KeyLookup, Tenant

API_PREFIX = "/v1/"
RETRY_AFTER_S = 1


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a body grows past the limit: an ``HTTPException``, which
    FastAPI passes on while it reads a body, so the app answers it as any 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is over the service's limit of {limit} bytes")


class BodyTimedOut(HTTPException):
    """Raised from ``receive`` when the body has not arrived in time: answered 408."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(408, f"the request body did not arrive within {timeout_s:g} s")


RETRY_STATUSES = frozenset({429, 503})  # answered with Retry-After


async def refuse(send: Send, exc: TiermemError) -> None:
    """Answer ``exc`` as the app's error handler would, without the app."""
    status = status_of(exc)
    data = json.dumps(error_body(exc), ensure_ascii=True).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
    if status in RETRY_STATUSES:
        headers.append((b"retry-after", b"%d" % RETRY_AFTER_S))
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def _header(scope: Scope, wanted: bytes) -> bytes | None:
    for name, value in scope["headers"]:
        if name == wanted:
            return bytes(value)
    return None


def _declared_length(scope: Scope) -> int | None:
    value = _header(scope, b"content-length")
    try:
        return None if value is None else int(value)
    except ValueError:
        return None  # the server refuses a malformed length itself


def authenticate(keys: KeyLookup, scope: Scope) -> Tenant:
    """The tenant of ``Authorization: Bearer <key>``, or ``AuthenticationError``."""
    header = _header(scope, b"authorization")
    scheme, _, key = (header or b"").decode("latin-1").partition(" ")
    if header is None or scheme.lower() != "bearer" or not key.strip():
        raise AuthenticationError("no API key: send the header Authorization: Bearer <key>")
    tenant = keys.tenant_for(key.strip())
    if tenant is None:
        raise AuthenticationError("unknown API key")
    return tenant


class ApiGate:
    """ASGI middleware over ``/v1/``: the caller's tenant (into ``request.state.tenant``),
    at most ``max_body_bytes`` per body, arriving within ``body_timeout_s``, at most
    ``max_in_flight`` requests at once, and at most ``tenant_share`` of them one tenant's."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        keys: KeyLookup,
        max_body_bytes: int,
        max_in_flight: int,
        tenant_share: int,
        body_timeout_s: float = math.inf,
    ) -> None:
        self.app = app
        self.keys = keys
        self.max_body_bytes = max_body_bytes
        self.max_in_flight = max_in_flight
        self.tenant_share = tenant_share
        self.body_timeout_s = body_timeout_s
        self.in_flight = 0  # the event loop's thread alone changes these two
        self.by_tenant: dict[str, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(API_PREFIX):
            await self.app(scope, receive, send)
            return
        try:
            tenant = authenticate(self.keys, scope)
        except AuthenticationError as exc:
            await refuse(send, exc)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await refuse(send, RequestTooLargeError(BodyTooLarge(self.max_body_bytes).detail))
            return
        if self.in_flight >= self.max_in_flight:
            busy = f"{self.in_flight} requests in flight, the limit; retry in {RETRY_AFTER_S} s"
            await refuse(send, ServiceOverloadedError(busy))
            return
        mine = self.by_tenant.get(tenant.name, 0)
        if mine >= self.tenant_share:
            busy = (
                f"{mine} requests of this key's tenant in flight, its share of the service; "
                f"retry in {RETRY_AFTER_S} s"
            )
            await refuse(send, TenantBusyError(busy))
            return
        scope.setdefault("state", {})["tenant"] = tenant
        self.in_flight += 1
        self.by_tenant[tenant.name] = mine + 1
        try:
            await self.app(scope, self._limited(receive), send)
        finally:
            self.in_flight -= 1
            left = self.by_tenant.pop(tenant.name) - 1
            if left:
                self.by_tenant[tenant.name] = left

    def _limited(self, receive: Receive) -> Receive:
        received = 0
        deadline = time.monotonic() + self.body_timeout_s
        done = False

        async def limited() -> Message:
            nonlocal received, done
            if done:  # the body is in: what follows is the client leaving, wait as long
                return await receive()
            with anyio.move_on_after(deadline - time.monotonic()) as waited:
                message = await receive()
            if waited.cancelled_caught:
                raise BodyTimedOut(self.body_timeout_s)
            done = message["type"] != "http.request" or not message.get("more_body", False)
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise BodyTooLarge(self.max_body_bytes)
            return message

        return limited
