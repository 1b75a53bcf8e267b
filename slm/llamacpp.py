"""In-process llama.cpp through llama-cpp-python: the embedded default backend.

The output is constrained by a grammar built from the task's JSON schema; if the schema
cannot become a grammar the call fails loudly instead of silently decoding free JSON. Time
budgets are enforced by streaming and stopping at the deadline. A context is loaded once per
process for each (model file, n_ctx, n_threads, pool) and shared; calls to one context are
serialised (a llama context is not thread-safe). The pool names its owner: the online roles
and the offline consolidation each get their own context on the same file (the weights are
memory-mapped, so the OS shares them), and ``add()`` never waits behind a consolidation call.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiermem.errors import ConfigError, SLMTimeout, SLMUnavailable
from tiermem.slm.base import ONLINE, SLMRequest, SLMResponse

_MODELS: dict[tuple[str, int, int | None, str], tuple[Any, threading.Lock]] = {}
_LOAD_LOCK = threading.Lock()
_GRAMMARS: dict[str, Any] = {}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """llama.cpp prints its load log to stderr; keep a library's caller's terminal clean."""
    with contextlib.redirect_stderr(io.StringIO()):
        yield


_BUILD_CHECKED: set[bool] = set()


def check_build(*, allow_amx: bool = False) -> None:
    """Refuse a llama.cpp build that would die with SIGILL on this CPU (and take the whole
    process with it): one compiled for instructions this CPU lacks, or for AMX unless it is
    allowed and the kernel grants it. Asking for AMX is also what lets an AMX build use its
    tiles."""
    if allow_amx in _BUILD_CHECKED:
        return
    import llama_cpp
    from tiermem.slm.cpu import check_installed_build

    info = llama_cpp.llama_print_system_info().decode()
    unsafe = check_installed_build(info, allow_amx=allow_amx).unsafe
    if unsafe:
        raise SLMUnavailable(
            "load",
            f"the installed llama.cpp build uses {', '.join(unsafe)}, which this CPU cannot run;"
            " rebuild it for this machine with `make install` (see `tiermem doctor`)",
        )
    _BUILD_CHECKED.add(allow_amx)


def load_llama(
    path: Path,
    n_ctx: int,
    n_threads: int | None,
    pool: str = ONLINE,
    *,
    allow_amx: bool = False,
) -> tuple[Any, threading.Lock]:
    """The context for ``path`` with these settings in ``pool``, loaded on first use, and
    the lock that serialises calls to it."""
    key = (str(path), n_ctx, n_threads, pool)
    with _LOAD_LOCK:
        if key not in _MODELS:
            if not path.is_file():
                raise ConfigError(f"GGUF model file {path} does not exist")
            check_build(allow_amx=allow_amx)
            from llama_cpp import Llama

            try:
                with _quiet():
                    llama = Llama(
                        model_path=str(path),
                        n_ctx=n_ctx,
                        n_threads=n_threads,
                        verbose=False,
                        seed=0,
                    )
            except (ValueError, RuntimeError, OSError) as exc:
                raise SLMUnavailable("load", f"cannot load {path}: {exc}") from exc
            _MODELS[key] = (llama, threading.Lock())
        return _MODELS[key]


@dataclass(frozen=True, slots=True)
class Speed:
    """Measured throughput of one model on this machine."""

    load_s: float
    prefill_tokens: int
    prefill_tok_s: float
    decode_tokens: int
    decode_tok_s: float


_SPEED_PROMPT = (
    "Memory entries: Maya booked flight TP1351 to Lisbon for 9 October. Her sister Ines runs a "
    "bakery in Lisbon. Maya is vegetarian and allergic to peanuts. She adopted a greyhound "
    "called Comet last spring and walks him every morning before work. "
)


def measure_speed(
    path: Path,
    *,
    n_threads: int | None = None,
    prefill: int = 256,
    decode: int = 64,
    allow_amx: bool = False,
) -> Speed:
    """Prefill ``prefill`` prompt tokens, then decode ``decode`` tokens greedily; the same
    count of tokens every time, so runs and builds compare. Loads its own context (not the
    shared one), so it measures the model alone."""
    from llama_cpp import Llama

    check_build(allow_amx=allow_amx)
    started = time.perf_counter()
    with _quiet():
        llama = Llama(
            model_path=str(path),
            n_ctx=prefill + decode + 16,
            n_threads=n_threads or max(1, os.cpu_count() or 2),
            n_batch=512,
            verbose=False,
            seed=0,
        )
    load_s = time.perf_counter() - started
    tokens = llama.tokenize(_SPEED_PROMPT.encode() * (1 + prefill // 40))[:prefill]
    started = time.perf_counter()
    llama.eval(tokens)
    prefill_s = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(decode):
        token = llama.sample(temp=0.0)
        llama.eval([token])
    decode_s = time.perf_counter() - started
    llama.close()
    return Speed(load_s, len(tokens), len(tokens) / prefill_s, decode, decode / decode_s)


def grammar_for(schema: dict[str, Any]) -> Any:
    from llama_cpp.llama_grammar import LlamaGrammar

    text = json.dumps(schema, sort_keys=True)
    if text not in _GRAMMARS:
        try:
            with _quiet():
                _GRAMMARS[text] = LlamaGrammar.from_json_schema(text, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise ConfigError(f"this JSON schema cannot be turned into a grammar: {exc}") from exc
    return _GRAMMARS[text]


class LlamaCppBackend:
    name = "llamacpp"

    def __init__(
        self,
        model_path: Path,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        pool: str = ONLINE,
        allow_amx: bool = False,
    ) -> None:
        self._path = model_path
        self._allow_amx = allow_amx
        self._n_ctx = n_ctx
        self._n_threads = n_threads or max(1, (os.cpu_count() or 2))
        self._pool = pool

    @property
    def model(self) -> str:
        return self._path.name

    def complete(self, request: SLMRequest) -> SLMResponse:
        llama, lock = load_llama(
            self._path, self._n_ctx, self._n_threads, self._pool, allow_amx=self._allow_amx
        )
        grammar = grammar_for(dict(request.json_schema))
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        deadline = time.monotonic() + request.timeout_s
        pieces: list[str] = []
        finish = "length"
        with lock:
            llama.reset()
            try:
                stream = llama.create_chat_completion(
                    messages=messages,
                    grammar=grammar,
                    max_tokens=request.max_tokens,
                    temperature=request.temperature,
                    seed=request.seed,
                    stream=True,
                )
                for chunk in stream:
                    choice = chunk["choices"][0]
                    pieces.append(choice["delta"].get("content") or "")
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
                    if time.monotonic() > deadline:
                        stream.close()
                        raise SLMTimeout(request.task, f"no answer within {request.timeout_s} s")
            except ValueError as exc:  # llama.cpp: prompt longer than the context
                raise SLMUnavailable(request.task, str(exc)) from exc
            completion_tokens = sum(1 for p in pieces if p)
            prompt_tokens = max(0, int(llama.n_tokens) - completion_tokens)
        return SLMResponse("".join(pieces), prompt_tokens, completion_tokens, self.model, finish)

    def close(self) -> None:
        return None  # contexts are shared per process and pool
