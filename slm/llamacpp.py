"""In-process llama.cpp through llama-cpp-python: the embedded default backend.

The output is constrained by a grammar built from the task's JSON schema; if the schema
cannot become a grammar the call fails loudly instead of silently decoding free JSON. Time
budgets are enforced by streaming and stopping at the deadline. A context is loaded once per
process for each (model file, n_ctx, n_threads, pool) and shared; calls to one context are
serialised (a llama context is not thread-safe). The pool names its owner: the online roles
and the offline consolidation each get their own context on the same file (the weights are
memory-mapped, so the OS shares them), and ``add()`` never waits behind a consolidation call.

A LoRA adapter (a GGUF LoRA, ``lora_path``) is applied when the context loads; llama.cpp then
reads the weights instead of mapping them, so that context's memory is its own.

``score_next_token`` scores the first answer token instead of generating it, and keeps the
context's KV cache between calls: the candidates of one query share the prompt up to the
memory, and only what follows the longest common prefix with the previous call is evaluated.
``score_next_tokens`` scores a query's candidates in one batch (``llamacpp_batch``), faster on
CPU than one call each.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tiermem.errors import ConfigError, SLMTimeout, SLMUnavailable
from tiermem.slm.base import ONLINE, ScoreRequest, SLMRequest, SLMResponse, TokenScores
from tiermem.slm.llamacpp_batch import BatchScorer
from tiermem.slm.scoring import spells

_MODELS: dict[tuple[str, int, int | None, str, str, float], tuple[Any, threading.Lock]] = {}
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
    from tiermem.extras import extra_dependency
    from tiermem.slm.cpu import check_installed_build

    llama_cpp = extra_dependency("llama_cpp", "llamacpp", "an in-process GGUF model")

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
    lora_path: Path | None = None,
    lora_scale: float = 1.0,
) -> tuple[Any, threading.Lock]:
    """The context for ``path`` (with the LoRA adapter ``lora_path``, if given) with these
    settings in ``pool``, loaded on first use, and the lock that serialises calls to it."""
    key = (str(path), n_ctx, n_threads, pool, str(lora_path or ""), lora_scale)
    with _LOAD_LOCK:
        if key not in _MODELS:
            if not path.is_file():
                raise ConfigError(f"GGUF model file {path} does not exist")
            if lora_path is not None and not lora_path.is_file():
                raise ConfigError(f"LoRA adapter file {lora_path} does not exist")
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
                        lora_path=str(lora_path) if lora_path is not None else None,
                        lora_scale=lora_scale,
                    )
            except (ValueError, RuntimeError, OSError) as exc:
                adapter = f" with adapter {lora_path}" if lora_path is not None else ""
                raise SLMUnavailable("load", f"cannot load {path}{adapter}: {exc}") from exc
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
        lora_path: Path | None = None,
        lora_scale: float = 1.0,
    ) -> None:
        self._path = model_path
        self._lora_path = lora_path.expanduser() if lora_path is not None else None
        self._lora_scale = lora_scale
        self._allow_amx = allow_amx
        self._n_ctx = n_ctx
        self._n_threads = n_threads or max(1, (os.cpu_count() or 2))
        self._pool = pool

    @property
    def model(self) -> str:
        if self._lora_path is None:
            return self._path.name
        return f"{self._path.name}+{self._lora_path.name}"

    def _load(self) -> tuple[Any, threading.Lock]:
        return load_llama(
            self._path,
            self._n_ctx,
            self._n_threads,
            self._pool,
            allow_amx=self._allow_amx,
            lora_path=self._lora_path,
            lora_scale=self._lora_scale,
        )

    def complete(self, request: SLMRequest) -> SLMResponse:
        llama, lock = self._load()
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

    def score_next_token(self, request: ScoreRequest) -> TokenScores:
        """Evaluate the chat-templated prompt (reusing the cached prefix) and read the first
        answer token's distribution. One evaluation runs to its end: a call that overran its
        budget is refused after it returns (``score_task``)."""
        llama, lock = self._load()
        with lock:
            try:
                tokens = chat_tokens(llama, _messages(request))
                choice_ids = choice_token_ids(llama, request.choices)
                if not tokens:
                    raise ValueError("the prompt has no tokens")
                if len(tokens) >= self._n_ctx:
                    raise ValueError(f"{len(tokens)} prompt tokens exceed n_ctx {self._n_ctx}")
                evaluated = evaluate_reusing_prefix(llama, tokens)
                logits = last_logits(llama)
            except (ValueError, RuntimeError) as exc:  # RuntimeError: llama_decode failed
                llama.reset()  # what the cache holds is unknown now; the next call starts over
                raise SLMUnavailable(request.task, str(exc)) from exc
        return TokenScores(logprobs_of(logits, choice_ids), len(tokens), evaluated, self.model)

    def score_next_tokens(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        """``score_next_token`` for each request, all in one batch on a scoring context of
        their own (``llamacpp_batch``): the prefix they share is evaluated once, and each
        request's remainder beside the others'. The first result counts the prefix's tokens
        as evaluated, the others only their own."""
        if not requests:
            return []
        llama, lock = self._load()
        with lock:
            try:
                prompts = [chat_tokens(llama, _messages(r)) for r in requests]
                choice_ids = [choice_token_ids(llama, r.choices) for r in requests]
                scored = self._batch_scorer(llama).score(prompts)
            except (ValueError, RuntimeError) as exc:
                raise SLMUnavailable(requests[0].task, str(exc)) from exc
        return [
            TokenScores(logprobs_of(one.logits, ids), len(prompt), one.evaluated, self.model)
            for one, ids, prompt in zip(scored, choice_ids, prompts, strict=True)
        ]

    def _batch_scorer(self, llama: Any) -> BatchScorer:
        scorer = _BATCH_SCORERS.get(llama)
        if scorer is None:
            scorer = _BATCH_SCORERS[llama] = BatchScorer(llama, self._n_ctx)
        return scorer

    def close(self) -> None:
        return None  # contexts are shared per process and pool


_FORMATTERS: dict[str, Any] = {}
# one batch scorer per loaded context, gone with it
_BATCH_SCORERS: weakref.WeakKeyDictionary[Any, BatchScorer] = weakref.WeakKeyDictionary()


def _messages(request: ScoreRequest) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in request.messages]


_CHOICE_IDS: dict[tuple[str, tuple[str, ...]], dict[str, list[int]]] = {}


def _token_text(llama: Any, token: int) -> str:
    if token < 0:
        return ""
    text: bytes = llama.detokenize([token], special=True)
    return text.decode("utf-8", errors="replace")


def chat_tokens(llama: Any, messages: list[dict[str, str]]) -> list[int]:
    """The prompt tokens for ``messages`` through the model's own chat template (the one a
    Hugging Face tokenizer applies in training), with the assistant turn opened."""
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        raise ValueError("the model has no chat template to score with")
    key = f"{llama.model_path}\x1f{template}"  # the template's bos/eos are the model's
    if key not in _FORMATTERS:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        _FORMATTERS[key] = Jinja2ChatFormatter(
            template=template,
            eos_token=_token_text(llama, llama.token_eos()),
            bos_token=_token_text(llama, llama.token_bos()),
            add_generation_prompt=True,
        )
    rendered = _FORMATTERS[key](messages=messages)
    tokens: list[int] = llama.tokenize(
        rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True
    )
    return tokens


def choice_token_ids(llama: Any, choices: tuple[str, ...]) -> dict[str, list[int]]:
    """For each choice, the single tokens that spell it as a first answer word (``yes``,
    ``Yes``, `` yes``, ``YES``, as this vocabulary has them). A choice with no single token,
    or a token spelling two choices, cannot be scored."""
    key = (str(llama.model_path), choices)
    if key in _CHOICE_IDS:
        return _CHOICE_IDS[key]
    out: dict[str, list[int]] = {}
    for choice in choices:
        ids: set[int] = set()
        for word in {choice, choice.lower(), choice.capitalize(), choice.upper()}:
            for text in (word, " " + word):
                pieces = llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
                if len(pieces) == 1 and spells(_token_text(llama, pieces[0]), choice):
                    ids.add(pieces[0])
        if not ids:
            raise ValueError(f"no single token of this model spells {choice!r}")
        out[choice] = sorted(ids)
    taken = [i for ids in out.values() for i in ids]
    if len(taken) != len(set(taken)):
        raise ValueError(f"one token spells two of the choices {choices}")
    _CHOICE_IDS[key] = out
    return out


def evaluate_reusing_prefix(llama: Any, tokens: list[int]) -> int:
    """Evaluate ``tokens``, keeping the KV cache of the longest prefix they share with what the
    context holds; returns how many tokens were evaluated. The last token is always evaluated
    again, as its logits are the answer's. A context that cannot drop part of its cache (a
    recurrent model) starts over."""
    from llama_cpp import Llama, llama_get_memory, llama_memory_seq_rm

    cached = llama.input_ids[: llama.n_tokens].tolist()
    keep = min(int(Llama.longest_token_prefix(cached, tokens)), len(tokens) - 1)
    if keep > 0:
        memory = llama_get_memory(llama.ctx)
        if memory is None or not llama_memory_seq_rm(memory, 0, keep, -1):
            keep = 0
    if keep > 0:
        llama.n_tokens = keep
    else:
        llama.reset()
    llama.eval(tokens[keep:])
    return len(tokens) - keep


def last_logits(llama: Any) -> Any:
    """A copy of the logits after the last evaluated token (a numpy array over the vocabulary)."""
    from llama_cpp import llama_get_logits_ith

    pointer = llama_get_logits_ith(llama.ctx, -1)
    return np.ctypeslib.as_array(pointer, shape=(llama.n_vocab(),)).astype(np.float64)


def logprobs_of(logits: Any, choice_ids: dict[str, list[int]]) -> dict[str, float]:
    """Each choice's log-probability: the softmax mass of the tokens that spell it."""
    total = logsumexp_array(logits)
    return {choice: logsumexp_array(logits[ids]) - total for choice, ids in choice_ids.items()}


def logsumexp_array(values: Any) -> float:
    """log(sum(exp(v))) over a numpy array, stable."""
    top = float(values.max())
    return top + math.log(float((np.exp(values - top)).sum()))
