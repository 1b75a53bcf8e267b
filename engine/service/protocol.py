"""The HTTP/1.1 protocol the service runs: uvicorn's h11 one, except that a request too
malformed to reach the app (a broken chunked body, a bad request line) is answered 400 in the
service's JSON error shape, ``invalid_request``, instead of plain text."""

from __future__ import annotations

import json

import h11
from tiermem.service.codes import protocol_body
from uvicorn.protocols.http.h11_impl import H11Protocol


class JSONErrorsH11Protocol(H11Protocol):
    """``uvicorn.Config(http=JSONErrorsH11Protocol)``."""

    def send_400_response(self, msg: str) -> None:
        body = json.dumps(protocol_body("invalid_request", msg)).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body)),
            (b"connection", b"close"),
        ]
        try:
            for event in (
                h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event))
        except h11.LocalProtocolError:  # a response had already started: just hang up
            pass
        self.transport.close()
