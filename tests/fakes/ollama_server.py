"""A small Ollama-protocol server for tests: real HTTP, ``/api/chat`` and ``/api/tags``, and
Ollama's OpenAI-compatible ``/v1/chat/completions``, backed by any tiermem backend (the
scripted fake, or a real GGUF model in-process). Given an embedder, it also serves
``embedding_model`` on ``/api/embed`` and on the OpenAI-compatible ``/v1/embeddings``
(floats, or base64 when asked), embedding each input exactly as sent (prefixes included).
``fail_embeds`` holds HTTP statuses that the next embedding requests get instead, one each.

No Ollama server can be installed on the build machine; the ``ollama`` backend talks to this
one through the official ``ollama`` client exactly as it would to Ollama, and the ``openai``
backend through the official ``openai`` client.

A request for ``logprobs`` is answered from the backend's ``score_next_token`` over the
server's ``vocabulary`` (the token texts it knows): the most probable is the answer, and the
top ``top_logprobs`` of the vocabulary are listed, as a server lists the top of its own.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
from tiermem.embedding.base import Embedder, EmbedMode
from tiermem.errors import SLMError
from tiermem.slm.base import ChatMessage, NextTokenScorer, ScoreRequest, SLMBackend, SLMRequest


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    top: list[tuple[str, float]] | None = None  # the listed logprobs, when they were asked


class OllamaProtocolServer:
    def __init__(
        self,
        backend: SLMBackend | None,
        model: str,
        delay_s: float = 0.0,
        vocabulary: tuple[str, ...] = ("yes", "no"),
        cached_tokens: int = 0,
        embedder: Embedder | None = None,
        embedding_model: str = "nomic-embed-text",
    ) -> None:
        self.backend = backend
        self.model = model
        self.delay_s = delay_s
        self.vocabulary = vocabulary
        self.cached_tokens = cached_tokens  # what /v1 reports as a cached prompt prefix
        self.embedder = embedder
        self.embedding_model = embedding_model
        self.fail_embeds: list[int] = []
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
                if self.path in ("/api/embed", "/v1/embeddings"):
                    self._send(*server.embed_reply(self.path, body))
                    return
                if self.path not in ("/api/chat", "/v1/chat/completions"):
                    self._send(404, {"error": "not found"})
                    return
                if body.get("model") != server.model:
                    self._send(404, {"error": f"model '{body.get('model')}' not found"})
                    return
                time.sleep(server.delay_s)
                try:
                    answer = server.answer(body, self.path.startswith("/v1"))
                except SLMError as exc:
                    self._send(500, {"error": str(exc)})
                    return
                reply = server.openai_reply if self.path.startswith("/v1") else server.ollama_reply
                self._send(200, reply(answer))

        return Handler

    def embed_reply(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(status, body) for an embedding request, in Ollama's or OpenAI's shape."""
        openai = path.startswith("/v1")
        if self.fail_embeds:
            status = self.fail_embeds.pop(0)
            return status, _error(f"scripted failure {status}", openai)
        if self.embedder is None or body.get("model") != self.embedding_model:
            return 404, _error(f"model {body.get('model')!r} not found, try pulling it", openai)
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return 400, _error("input must be a string or a list of strings", openai)
        time.sleep(self.delay_s)
        vectors = self.embedder.embed(texts, EmbedMode.DOCUMENT).astype(np.float32)
        tokens = sum(len(t.split()) for t in texts)
        if not openai:
            return 200, {
                "model": self.embedding_model,
                "embeddings": vectors.tolist(),
                "total_duration": 1000,
                "load_duration": 0,
                "prompt_eval_count": tokens,
            }
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": base64.b64encode(v.tobytes()).decode() if as_base64 else v.tolist(),
            }
            for i, v in enumerate(vectors)
        ]
        return 200, {
            "object": "list",
            "data": data[::-1],  # in any order: the index says which input a vector is
            "model": self.embedding_model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def answer(self, body: dict[str, Any], openai: bool) -> Answer:
        """The backend's answer to a chat body: generated text, or, when logprobs are asked,
        the most probable token of the vocabulary with the top of the vocabulary listed."""
        if self.backend is None:
            raise SLMError("fake", "this server serves no chat model")
        messages = [ChatMessage(m["role"], m["content"]) for m in body["messages"]]
        if body.get("logprobs"):
            assert isinstance(self.backend, NextTokenScorer)
            scores = self.backend.score_next_token(ScoreRequest("fake", messages, self.vocabulary))
            ranked = sorted(scores.logprobs.items(), key=lambda item: -item[1])
            top = ranked[: int(body.get("top_logprobs") or 0) or 1]
            return Answer(ranked[0][0], scores.prompt_tokens, 1, "length", top)
        options = body.get("options") or {}
        limit = body.get("max_tokens") if openai else options.get("num_predict")
        schema = body.get("format") or (body.get("response_format") or {}).get("json_schema", {})
        request = SLMRequest(
            task="ollama",
            messages=messages,
            json_schema=schema.get("schema", schema) or {"type": "object"},
            max_tokens=int(limit or 256),
            temperature=float(options.get("temperature", body.get("temperature", 0.0))),
            timeout_s=120.0,
        )
        reply = self.backend.complete(request)
        return Answer(reply.text, reply.prompt_tokens, reply.completion_tokens, reply.finish_reason)

    def ollama_reply(self, answer: Answer) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "created_at": datetime.now(UTC).isoformat(),
            "message": {"role": "assistant", "content": answer.text},
            "done": True,
            "done_reason": answer.finish_reason,
            "prompt_eval_count": answer.prompt_tokens,
            "eval_count": answer.completion_tokens,
        }
        if answer.top is not None:
            listed = [{"token": t, "logprob": lp} for t, lp in answer.top]
            first = {"token": answer.text, "logprob": answer.top[0][1], "top_logprobs": listed}
            body["logprobs"] = [first]
        return body

    def openai_reply(self, answer: Answer) -> dict[str, Any]:
        text, prompt, completion = answer.text, answer.prompt_tokens, answer.completion_tokens
        logprobs = None
        if answer.top is not None:
            listed = [{"token": t, "logprob": lp, "bytes": None} for t, lp in answer.top]
            first = {"token": text, "logprob": answer.top[0][1], "bytes": None}
            logprobs = {"content": [{**first, "top_logprobs": listed}], "refusal": None}
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": answer.finish_reason,
                    "logprobs": logprobs,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": min(prompt, self.cached_tokens)},
            },
        }

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _error(message: str, openai: bool) -> dict[str, Any]:
    return {"error": {"message": message, "type": "error"}} if openai else {"error": message}


@contextmanager
def serving(
    backend: SLMBackend | None = None,
    model: str = "llama3.2:1b-instruct-q4_K_M",
    delay_s: float = 0.0,
    vocabulary: tuple[str, ...] = ("yes", "no"),
    cached_tokens: int = 0,
    embedder: Embedder | None = None,
    embedding_model: str = "nomic-embed-text",
) -> Iterator[OllamaProtocolServer]:
    server = OllamaProtocolServer(
        backend, model, delay_s, vocabulary, cached_tokens, embedder, embedding_model
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def as_role_request(request: SLMRequest) -> SLMRequest:
    """``request`` with its role as the task: the server cannot see the task, but each role's
    schema tells it apart."""
    properties = request.json_schema.get("properties", {})
    task = (
        "writer"
        if "entries" in properties
        else "controller"
        if "queries" in properties
        else "selector"
        if "supporting" in properties
        else "generator"
    )
    return SLMRequest(task, request.messages, request.json_schema, request.max_tokens)
