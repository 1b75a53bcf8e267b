"""The gate of the API (``/v1/``), before a request reaches the memory, in this order: its API
key (401, before any of its body is read), the body size (413, also for a chunked body that
declares no length), and the requests in flight (503 with ``Retry-After``). Health checks and
metrics pass freely: they answer under any load."""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from tiermem.errors import (
    AuthenticationError,
    RequestTooLargeError,
    ServiceOverloadedError,
    TiermemError,
)
from tiermem.service.codes import error_body, status_of
from tiermem.service.keys import KeyRing, Tenant

API_PREFIX = "/v1/"
RETRY_AFTER_S = 1


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a body grows past the limit: an ``HTTPException``, which
    FastAPI passes on while it reads a body, so the app answers it as any 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is over the service's limit of {limit} bytes")


async def refuse(send: Send, exc: TiermemError) -> None:
    """Answer ``exc`` as the app's error handler would, without the app."""
    status = status_of(exc)
    data = json.dumps(error_body(exc), ensure_ascii=True).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
    if status == 503:
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


def authenticate(keys: KeyRing, scope: Scope) -> Tenant:
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
    at most ``max_body_bytes`` per body, at most ``max_in_flight`` requests at once."""

    def __init__(
        self, app: ASGIApp, *, keys: KeyRing, max_body_bytes: int, max_in_flight: int
    ) -> None:
        self.app = app
        self.keys = keys
        self.max_body_bytes = max_body_bytes
        self.max_in_flight = max_in_flight
        self.in_flight = 0  # the event loop's thread alone changes it

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
        scope.setdefault("state", {})["tenant"] = tenant
        self.in_flight += 1
        try:
            await self.app(scope, self._limited(receive), send)
        finally:
            self.in_flight -= 1

    def _limited(self, receive: Receive) -> Receive:
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise BodyTooLarge(self.max_body_bytes)
            return message

        return limited
