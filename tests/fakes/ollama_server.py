"""A small Ollama-protocol server for tests: real HTTP, ``/api/chat`` and ``/api/tags``, backed
by any tiermem backend (the scripted fake, or a real GGUF model in-process).

No Ollama server can be installed on the build machine; the ``ollama`` backend talks to this
one through the official ``ollama`` client exactly as it would to Ollama.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tiermem.errors import SLMError
from tiermem.slm.base import ChatMessage, SLMBackend, SLMRequest


class OllamaProtocolServer:
    def __init__(self, backend: SLMBackend, model: str, delay_s: float = 0.0) -> None:
        self.backend = backend
        self.model = model
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return None

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except BrokenPipeError:  # the client gave up at its timeout; a real server
                    return  # drops the answer the same way

            def do_GET(self) -> None:
                if self.path != "/api/tags":
                    self._send(404, {"error": "not found"})
                    return
                self._send(
                    200,
                    {
                        "models": [
                            {
                                "name": server.model,
                                "model": server.model,
                                "modified_at": datetime.now(UTC).isoformat(),
                                "size": 0,
                                "digest": "0" * 64,
                                "details": {"format": "gguf"},
                            }
                        ]
                    },
                )

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append({"path": self.path, **body})
                if self.path != "/api/chat":
                    self._send(404, {"error": "not found"})
                    return
                if body.get("model") != server.model:
                    self._send(404, {"error": f"model '{body.get('model')}' not found"})
                    return
                time.sleep(server.delay_s)
                options = body.get("options") or {}
                request = SLMRequest(
                    task="ollama",
                    messages=[ChatMessage(m["role"], m["content"]) for m in body["messages"]],
                    json_schema=body.get("format") or {"type": "object"},
                    max_tokens=int(options.get("num_predict", 256)),
                    temperature=float(options.get("temperature", 0.0)),
                    timeout_s=120.0,
                )
                try:
                    answer = server.backend.complete(request)
                except SLMError as exc:
                    self._send(500, {"error": str(exc)})
                    return
                self._send(
                    200,
                    {
                        "model": server.model,
                        "created_at": datetime.now(UTC).isoformat(),
                        "message": {"role": "assistant", "content": answer.text},
                        "done": True,
                        "done_reason": answer.finish_reason,
                        "prompt_eval_count": answer.prompt_tokens,
                        "eval_count": answer.completion_tokens,
                    },
                )

        return Handler

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def serving(
    backend: SLMBackend, model: str = "llama3.2:1b-instruct-q4_K_M", delay_s: float = 0.0
) -> Iterator[OllamaProtocolServer]:
    server = OllamaProtocolServer(backend, model, delay_s)
    server.start()
    try:
        yield server
    finally:
        server.stop()
