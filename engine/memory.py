"""The client API. ``Memory`` is the one implementation; ``AsyncMemory`` wraps it for asyncio.

>>> from tiermem import Memory, TiermemConfig
>>> with Memory(TiermemConfig.for_tests()) as memory:
...     _ = memory.add([{"role": "user", "content": "My sister Ana lives in Lisbon."}],
...                    user_id="alice")
...     memory.search("where does my sister live", user_id="alice", k=1)[0].entry.text
'user: My sister Ana lives in Lisbon.'
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from tiermem.access import AccessLog
from tiermem.clock import Clock
from tiermem.components import Components, build_components
from tiermem.config import DEFAULT_DATA_DIR, TiermemConfig
from tiermem.config.tuning import Expansion
from tiermem.context import DEFAULT_BUDGET_TOKENS, DeliveredContext, pack
from tiermem.errors import (
    ClosedError,
    ConfigError,
    KnowledgeItemError,
    MemoryNotFoundError,
    TiermemError,
)
from tiermem.generator import supports
from tiermem.pipeline.deliver import build_context
from tiermem.pipeline.forget import ForgetReport as ForgetReport  # public here
from tiermem.pipeline.forget import run_forget
from tiermem.pipeline.read import run_search
from tiermem.pipeline.recovery import finish_unfinished, recover
from tiermem.pipeline.write import run_add, run_delete, run_update
from tiermem.presets import defaults_config
from tiermem.slm.meter import Meter
from tiermem.types import (
    LTM_ID_PREFIX,
    AddResult,
    AnswerResult,
    AuditEvent,
    MemoryEntry,
    SearchFilters,
    SearchHit,
    Turn,
    is_knowledge_id,
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

if TYPE_CHECKING:
    from tiermem.journal import LTMAuditEvent
    from tiermem.offline.consolidate import ConsolidationReport
    from tiermem.offline.scheduler import SchedulerState
    from tiermem.offline.wiring import Consolidation

logger = logging.getLogger(__name__)

_OPEN: weakref.WeakSet[Memory] = weakref.WeakSet()


@atexit.register
def _close_open_memories() -> None:
    """Close what a script left open while the interpreter can still run the stores' close
    (qdrant-client's own finaliser, run later at teardown, fails with a traceback)."""
    for memory in list(_OPEN):
        if memory._pid != os.getpid():  # a forked child's copy: the parent owns the files
            continue
        try:
            memory.close()
        except Exception:
            logger.warning("closing a Memory at exit failed", exc_info=True)


class Memory:
    """Long-term memory for an agent: STM per session, MTM per user, an audit trail.

    Build it with ``Memory.from_defaults(data_dir)`` (embedded Qdrant and all-MiniLM-L6-v2,
    no server) or ``Memory(config)``. It is thread-safe; writes are serialised.
    """

    def __init__(
        self,
        config: TiermemConfig,
        *,
        clock: Clock | None = None,
        components: Components | None = None,
    ) -> None:
        self.config = config
        self._c = components if components is not None else build_components(config, clock)
        self._write_lock = threading.RLock()
        self._access = AccessLog()  # reads count here; writes carry the counts to the store
        self._closed = False
        self._consolidation: Consolidation | None = None
        self._turns_since_trigger = 0
        self._pid = os.getpid()
        try:  # finish what a crash left half-done, before anything reads or writes
            recover(self._c)
        except BaseException:
            self.close()
            raise
        if self._c.ltm is not None:
            from tiermem.offline.wiring import start_consolidation

            try:
                self._consolidation = start_consolidation(config, self._c, self._write_lock)
            except BaseException:
                self.close()
                raise
        _OPEN.add(self)

    @classmethod
    def from_defaults(
        cls,
        data_dir: str | Path | None = None,
        *,
        model: str | None = None,
        roles: str | Iterable[str] | None = None,
        ltm: bool = False,
        clock: Clock | None = None,
    ) -> Memory:
        """The embedded default, measured best: everything on disk under ``data_dir``, no
        server, no model call (``tiermem.presets``).

        ``model`` (an alias such as ``"qwen0.5b"``, or a GGUF path) runs in-process through
        llama.cpp (``pip install 'tiermem[llamacpp]'``) the roles measured to beat their
        model-free stage on it: on qwen0.5b and qwen1.5b none. ``roles`` names them instead
        (``"controller"``, ``"selector"``, ``"writer"``, ``"generator"``); the others run
        model-free, and a named role measured to lose on the model warns once
        (``MeasuredToLoseWarning``). ``ltm=True`` turns on the knowledge graph and its
        scheduled consolidation (Qwen2.5-Coder-1.5B in-process)."""
        config = defaults_config(data_dir or DEFAULT_DATA_DIR, model=model, roles=roles)
        if ltm:
            config = config.model_copy(
                update={"ltm": config.ltm.model_copy(update={"enabled": True})}
            )
        return cls(config, clock=clock)

    @property
    def meter(self) -> Meter:
        """Every model call's counters (calls, validity, fallbacks, tokens, latency), by task."""
        return self._c.meter

    @property
    def components(self) -> Components:
        self._check_open()
        return self._c

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("this Memory is closed")

    # -- writes ---------------------------------------------------------------------------
    def add(
        self,
        messages: MessageLike | Iterable[MessageLike],
        user_id: str,
        session_id: str | None = None,
    ) -> AddResult:
        """Remember an exchange: its turns go to STM and the journal, its entries to MTM."""
        self._check_open()
        uid = validate_user_id(user_id)
        sid = validate_session_id(session_id)
        now = self._c.clock.now()  # the add's one clock reading: turns, entries, audit rows
        checked = normalize_messages(messages, uid, sid, now)
        with self._write_lock:
            self._access.write(self._c.store)
            result = run_add(self._c, uid, sid, checked.turns, now)
        if checked.empty:
            result = replace(result, empty_messages=checked.empty)
        self._maybe_trigger(uid, result)
        return result

    def _maybe_trigger(self, user_id: str, result: AddResult) -> None:
        """Consolidation is due after enough new turns, or when MTM is under pressure. It
        runs in the background; ``add`` never waits for it."""
        if self._consolidation is None:
            return
        cfg = self.config.ltm.consolidation
        self._turns_since_trigger += len(result.turns)
        pressure = bool(result.evicted_ids) or self._c.store.count(user_id) >= (
            cfg.capacity_pressure * self.config.mtm.capacity
        )
        if pressure or self._turns_since_trigger >= cfg.trigger_turns:
            self._turns_since_trigger = 0
            self._consolidation.scheduler.trigger()

    def update(self, memory_id: str, text: str, user_id: str) -> MemoryEntry:
        """Replace an entry's text (re-embedded); the old text stays in its history. LTM
        knowledge (an ``ltm:`` id) changes only by consolidation: ``KnowledgeItemError``."""
        self._check_open()
        uid = validate_user_id(user_id)
        new_text = validate_memory_text(text)
        with self._write_lock:
            self._access.write(self._c.store)
            return run_update(self._c, self._get(memory_id, uid, "update"), new_text)

    def delete(self, memory_id: str, user_id: str) -> None:
        """Remove an entry; its history keeps the deleted text until ``forget_user``. LTM
        knowledge (an ``ltm:`` id) changes only by consolidation: ``KnowledgeItemError``."""
        self._check_open()
        uid = validate_user_id(user_id)
        with self._write_lock:
            self._access.write(self._c.store)
            run_delete(self._c, self._get(memory_id, uid, "delete"))

    def forget_user(self, user_id: str) -> ForgetReport:
        """Erase the user everywhere: LTM support, MTM collection, source turns, audit rows,
        STM. The erasure is a durable job: if it stops half-way (a crash, a store error), it
        is finished before the next write, or when the memory next opens."""
        self._check_open()
        uid = validate_user_id(user_id)
        with self._write_lock:
            self._access.forget(uid)
            return run_forget(self._c, uid)

    # -- offline consolidation ------------------------------------------------------------
    def consolidate_now(self, user_id: str | None = None) -> ConsolidationReport:
        """Run consolidation in this thread (after any run in flight) for every user, or
        one. Raises ``ConfigError`` when LTM is off."""
        self._check_open()
        consolidation = self._require_consolidation()
        with self._write_lock:  # consolidation reads the counts
            self._access.write(self._c.store)
        if user_id is None:
            return consolidation.scheduler.run_now()
        uid = validate_user_id(user_id)
        return consolidation.run_for(uid)

    def consolidation_state(self) -> SchedulerState:
        """The scheduler as it stands: running, pending, runs, failures, next run, last
        report. Raises ``ConfigError`` when LTM is off."""
        return self._require_consolidation().scheduler.state()

    def _require_consolidation(self) -> Consolidation:
        if self._consolidation is None:
            raise ConfigError("LTM is off: set ltm.enabled to consolidate")
        return self._consolidation

    # -- reads ----------------------------------------------------------------------------
    def search(
        self,
        query: str,
        user_id: str,
        k: int | None = None,
        filters: SearchFilters | None = None,
        session_id: str | None = None,
    ) -> list[SearchHit]:
        """The user's memories most relevant to ``query``, best first, at most ``k``. The
        session's STM lets the controller resolve references such as "she" or "that trip".

        With LTM on, hits of ``tier`` LTM carry shared, de-identified knowledge (``hit.fact``)
        beside the user's own entries (``hit.entry``); ``hit.id``/``hit.text`` hold for both."""
        self._check_open()
        uid = validate_user_id(user_id)
        limit = validate_k(self.config.default_k if k is None else k)
        text = validate_text(query)
        stm = self._c.stm.window(uid, validate_session_id(session_id))
        hits = run_search(self._c, uid, text, limit, validate_filters(filters), stm)
        return self._access.count_hits(uid, hits, self._c.clock.now())

    def context(
        self,
        query: str,
        user_id: str,
        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
        session_id: str | None = None,
        filters: SearchFilters | None = None,
        k: int | None = None,
        expand: bool = True,
    ) -> DeliveredContext:
        """What a generator should read for ``query``: the turns behind the best hits (and,
        with ``expand``, an exchange's turns alone when the whole does not fit, the later
        statements of a changed fact, long units worth less per token), grouped by session
        under one date each, at most ``budget_tokens`` by the memory's token counter.

        ``k`` hits are retrieved (by default one per ``delivery.tokens_per_hit`` tokens of
        budget, 12); fewer are delivered when the budget is spent first. ``hits`` of the
        result are those delivered, with their provenance; only they count as accessed."""
        self._check_open()
        uid = validate_user_id(user_id)
        expansion = self._c.policy.delivery.expansion_for(expand)
        ctx = self._deliver(query, uid, budget_tokens, session_id, filters, k, expansion)
        return replace(ctx, hits=tuple(self._access.count_hits(uid, ctx.hits, self._c.clock.now())))

    def _deliver(
        self,
        query: str,
        uid: str,
        budget_tokens: int,
        session_id: str | None,
        filters: SearchFilters | None,
        k: int | None,
        expansion: Expansion,
    ) -> DeliveredContext:
        """``context()`` without counting access: the caller counts what it hands out."""
        budget = validate_k(budget_tokens, "budget_tokens")
        delivery = self._c.policy.delivery
        limit = validate_k(k if k is not None else delivery.hits_for(budget, self.config.default_k))
        sid = validate_session_id(session_id)
        stm = self._c.stm.window(uid, sid)
        text, checked = validate_text(query), validate_filters(filters)
        hits = run_search(self._c, uid, text, limit, checked, stm)
        return build_context(self._c, uid, hits, budget, expansion)

    def answer(
        self,
        query: str,
        user_id: str,
        session_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> AnswerResult:
        """Answer from memory: the text, the hits used, their source turns, context size.
        The generator reads ``context()`` at ``generator.max_memories`` hits, within
        ``delivery.answer_budget_tokens``. A context that shares no content word with the
        question (``tiermem.generator.supports``) is not used: the answer is that memory
        holds nothing about it (``NOTHING_IN_MEMORY``), with no hits."""
        self._check_open()
        uid = validate_user_id(user_id)
        sid = validate_session_id(session_id)
        k = self.config.generator.max_memories
        delivery = self._c.policy.delivery
        budget = delivery.answer_budget_tokens
        ctx = self._deliver(query, uid, budget, sid, filters, k, delivery.answer_expansion())
        floor = self.config.generator.support_min_similarity
        if not supports(query, ctx, floor):  # the nearest bear on nothing: none used or counted
            ctx = pack([], {}, budget, self._c.tokens)
        ctx = replace(ctx, hits=tuple(self._access.count_hits(uid, ctx.hits, self._c.clock.now())))
        stm = self._c.stm.window(uid, sid)
        text = self._c.generator.generate(query, stm, ctx)
        return AnswerResult(text, ctx.hits, ctx.tokens, ctx.source_turns)

    def source_turns(self, hits: Iterable[SearchHit], user_id: str) -> dict[str, Turn]:
        """The stored turns that these hits came from, by turn id. LTM hits have none: their
        knowledge is de-identified and keeps no turn of anyone."""
        self._check_open()
        uid = validate_user_id(user_id)
        ids = sorted({tid for h in validate_hits(hits) for tid in h.source_turn_ids})
        return self._c.journal.turns(uid, ids)

    def get(self, memory_id: str, user_id: str) -> MemoryEntry:
        """One entry of this user; ``MemoryNotFoundError`` if this user has no such entry.
        An ``ltm:`` id (an LTM hit's) is shared knowledge, no user's entry:
        ``KnowledgeItemError`` (a ``MemoryNotFoundError``) says so; the hit itself holds the
        fact, and ``knowledge_history(id)`` its changes."""
        self._check_open()
        uid = validate_user_id(user_id)
        return self._access.overlay(uid, [self._get(memory_id, uid, "get")])[0]

    def _get(self, memory_id: str, user_id: str, operation: str) -> MemoryEntry:
        memory_id = self._own_memory_id(memory_id, user_id, operation)
        found = self._c.store.get(user_id, [memory_id])
        if not found:
            raise MemoryNotFoundError(memory_id, user_id)
        return found[0]

    @staticmethod
    def _own_memory_id(memory_id: str, user_id: str, operation: str) -> str:
        """A valid id of a user's own memory: never one of the shared knowledge graph, which
        no user owns (its items are de-identified, and only consolidation changes them)."""
        memory_id = validate_memory_id(memory_id, user_id)
        if is_knowledge_id(memory_id):
            raise KnowledgeItemError(memory_id, user_id, operation)
        return memory_id

    def get_all(self, user_id: str, filters: SearchFilters | None = None) -> list[MemoryEntry]:
        """Every entry of this user matching ``filters``, oldest first."""
        self._check_open()
        uid = validate_user_id(user_id)
        return self._access.overlay(uid, self._c.store.list_entries(uid, validate_filters(filters)))

    def history(self, memory_id: str, user_id: str) -> list[AuditEvent]:
        """Every change to this entry, oldest first (also after it was deleted). An ``ltm:``
        id raises ``KnowledgeItemError``: shared knowledge has no per-user history, see
        ``knowledge_history(id)``."""
        self._check_open()
        uid = validate_user_id(user_id)
        mid = self._own_memory_id(memory_id, uid, "history")
        events = self._c.journal.history(uid, mid)
        if not events:
            raise MemoryNotFoundError(mid, uid)
        return events

    def knowledge_history(self, item_id: str) -> list[LTMAuditEvent]:
        """Every change to one LTM item (an ``ltm:`` hit id or a graph id), oldest first:
        inserted, supported, updated, pruned, withdrawn by an erasure."""
        self._check_open()
        item_id = validate_memory_id(item_id, "ltm")
        events = self._c.journal.ltm_history(item_id.removeprefix(LTM_ID_PREFIX))
        if not events:
            raise MemoryNotFoundError(item_id, "ltm")
        return events

    def working_memory(self, user_id: str, session_id: str | None = None) -> tuple[Turn, ...]:
        """The STM window of a session, oldest first."""
        self._check_open()
        return self._c.stm.window(validate_user_id(user_id), validate_session_id(session_id))

    # -- lifecycle ------------------------------------------------------------------------
    def check_writable(self) -> None:
        """Raise the typed error that a write would meet now, else return: the store and the
        journal can each take a write (a full or read-only disk cannot), and whatever an
        earlier failure left unfinished (a write, an erasure) can be finished; it is, here,
        as the next write would. The service's ``/readyz``."""
        self._check_open()
        self._c.store.check_writable()
        self._c.journal.check_writable()
        if self._c.journal.has_unfinished():  # else no wait for a write in flight
            with self._write_lock:
                finish_unfinished(self._c)

    def close(self) -> None:
        """Release the store and the journal. Idempotent. New calls raise ``ClosedError`` at
        once; writes in flight finish first (close waits for them); a read in flight that
        reaches the journal after it closed raises ``ClosedError`` too."""
        if self._closed:
            return
        self._closed = True
        if self._consolidation is not None:
            # before the write lock: the chunk in flight commits under it
            self._consolidation.stop()  # finishes the chunk in flight, commits nothing more
        with self._write_lock:
            try:
                self._write_access_counts()
                if self._c.ltm is not None:
                    self._c.ltm.close()  # saves, then releases its directory to the next writer
                self._c.store.close()
            finally:
                self._c.journal.close()
                for close in self._c.closers:
                    close()

    def _write_access_counts(self) -> None:
        """At close: the reads' counts, or a warning that they are lost (a full disk)."""
        try:
            self._access.write(self._c.store)
        except TiermemError as exc:
            logger.warning("access counts not written at close (%s)", type(exc).__name__)

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
