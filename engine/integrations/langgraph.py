"""LangGraph's long-term memory store over a tiermem memory: ``TiermemStore``, a ``BaseStore``
(``pip install 'tiermem[langgraph]'``). It takes a ``Memory``, or anything else that is a
``tiermem.api.MemoryAPI`` (``RemoteMemory``), and keeps nothing of its own: every item lives
in tiermem, is audited there, survives a restart with it, and goes with ``forget_user``.

>>> from tiermem import Memory, TiermemConfig
>>> from tiermem.integrations.langgraph import TiermemStore
>>> with Memory(TiermemConfig.for_tests()) as memory:
...     store = TiermemStore(memory)
...     store.put(("alice", "prefs"), "drink", {"text": "Alice drinks green tea"})
...     store.get(("alice", "prefs"), "drink").value
...     [item.key for item in store.search(("alice",), query="what does Alice drink?")]
{'text': 'Alice drinks green tea'}
['drink']

Namespaces: ``(user_id,)`` or ``(user_id, session_id, *labels)``
    The first label is the tiermem user: each user's items are in that user's own MTM, which
    no other user's search reads. The second, when there is one, is the tiermem session the
    item is written in (the session a ``Memory.add`` of the same id writes in); an item of
    ``(user_id,)`` is in the user's default session, as ``add`` without a session writes.
    Labels after the session are sub-namespaces of it: ``("alice", "s1", "notes")`` is in
    session ``s1``. A namespace that cannot map is refused with ``NamespaceError`` (a
    ``tiermem.InvalidInputError`` and LangGraph's ``InvalidNamespaceError``, so a
    ``ValueError``) before anything is stored: an empty one, a user or session id that
    tiermem refuses (control characters, over 128 characters, not in Unicode NFC), or,
    for ``search`` and ``list_namespaces``, a prefix that names no user: tiermem has no list
    of its users, so the store cannot search or list across them.

Items: one item, one MTM entry
    ``put`` of a new key adds one turn (role user, speaker ``note``) to the session; the entry
    tiermem makes of it is the item, and any other entry the add derived from that turn (the
    pieces of a long text, an exchange with the session's previous turn) is deleted. The
    entry's text is what the memory reads: ``"note: "`` and the value's ``text`` when the
    value is exactly ``{"text": str}``, else the value as compact JSON, so the value dict is
    read back from the entry exactly. The namespace's labels and the key are in the turn's
    id, ``lg-<nonce>-<JSON [*labels, key]>`` (at most 128 characters), which the entry keeps
    as its source turn: ``get`` finds the item by it after a restart, with no index of its own.
    A second ``put`` of the key is ``Memory.update`` of that entry (skipped when the text is
    the same); a ``put`` of ``None`` or ``delete`` is ``Memory.delete``. ``created_at`` and
    ``updated_at`` are the entry's. An item is a memory like any other: ``search`` ranks it
    beside the user's conversation memories, and capacity eviction can forget it.

Reads
    ``get`` and ``search`` without a query read the session's entries (the user's, for a
    one-label prefix): a scan, linear in them. ``search`` with a query is ``Memory.search``
    (dense and lexical, fused) in the prefix's session, or across the user's sessions; the
    hits that are items under the prefix and pass ``filter`` come back as ``SearchItem`` with
    the hit's score, best first. Without a query they come newest first. ``filter`` is
    equality on value fields (nested dicts and lists compared whole), or the operators
    ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, as LangGraph's ``InMemoryStore``.

``batch`` runs its operations in order (a ``get`` after a ``put`` in the same batch sees it),
after checking every namespace, so a bad one stores nothing; a store failure stops it, the
operations before standing. ``abatch`` runs ``batch`` in a worker thread. TTLs are refused
(``supports_ttl`` is false); ``PutOp.index`` is ignored: tiermem indexes every entry whole.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from tiermem.api import MemoryAPI
from tiermem.errors import ConfigError, InvalidInputError, MemoryNotFoundError, TiermemError, shown
from tiermem.types import MemoryEntry, Message, SearchFilters, Tier
from tiermem.validation import DEFAULT_SESSION

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
    )
except ImportError as exc:  # the extra is not installed
    raise ConfigError(
        "tiermem.integrations.langgraph needs 'langgraph', from the langgraph extra: "
        "pip install 'tiermem[langgraph]'"
    ) from exc

from tiermem.integrations.langgraph_mapping import (
    SPEAKER,
    Address,
    ItemKeyError,
    ItemValueError,
    NamespaceError,
    StoredItem,
    address_of,
    check_op,
    entry_text,
    listing_scope,
    matches,
    namespace_matches,
    new_turn_id,
    search_scope,
    stored_item,
)

# A query search asks tiermem for this many hits at most (the service's default max_k).
MAX_SEARCH_K = 100


class ItemNotStoredError(TiermemError):
    """The memory made no entry of a put's turn (its writer merged it into another memory)."""


class TiermemStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are the memories of a tiermem memory (the module
    docstring says how they map). Thread-safe: its writes are serialised."""

    def __init__(self, memory: MemoryAPI) -> None:
        self._memory = memory
        self._write_lock = threading.Lock()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        todo = list(ops)
        for op in todo:  # every namespace checked before anything is written
            check_op(op)
        return [self._run(op) for op in todo]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            found = self._find(address_of(op.namespace), op.key)
            return found[0].as_item() if found else None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        if isinstance(op, PutOp):
            with self._write_lock:
                if op.value is None:
                    self._delete(address_of(op.namespace), op.key)
                else:
                    self._put(address_of(op.namespace), op.key, op.value)
            return None
        raise InvalidInputError(f"unknown store operation {type(op).__name__}")  # _check refused it

    # -- reads ------------------------------------------------------------------------------
    def _items(self, user_id: str, session_id: str | None) -> list[StoredItem]:
        filters = SearchFilters(session_id=session_id) if session_id is not None else None
        entries = self._memory.get_all(user_id, filters)
        return [s for e in entries if (s := stored_item(e)) is not None]

    def _find(self, where: Address, key: str) -> list[StoredItem]:
        """The item's entries, newest first: one, or more where a put stopped half-way."""
        found = [
            s
            for s in self._items(where.user_id, where.session_id or DEFAULT_SESSION)
            if s.namespace == where.namespace and s.key == key
        ]
        return sorted(found, key=lambda s: s.entry.updated_at, reverse=True)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        scope = search_scope(op.namespace_prefix)
        want = op.offset + op.limit
        if op.limit <= 0:
            return []

        def under(s: StoredItem) -> bool:
            n = len(scope.namespace)
            return s.namespace[:n] == scope.namespace and matches(s.value, op.filter)

        if not op.query:
            listed = [s for s in self._items(scope.user_id, scope.session_id) if under(s)]
            listed.sort(key=lambda s: s.entry.updated_at, reverse=True)
            return [s.as_search_item(None) for s in listed[op.offset : want]]
        filters = SearchFilters(session_id=scope.session_id) if scope.session_id else None
        k = min(max(2 * want, 10), MAX_SEARCH_K)
        while True:  # other memories of the user rank among the items: ask for more if short
            hits = self._memory.search(op.query, scope.user_id, k=k, filters=filters)
            found: dict[tuple[tuple[str, ...], str], SearchItem] = {}
            for hit in hits:
                s = stored_item(hit.entry) if hit.tier is Tier.MTM else None
                if s is not None and under(s):
                    found.setdefault((s.namespace, s.key), s.as_search_item(hit.score))
            if len(found) >= want or len(hits) < k or k >= MAX_SEARCH_K:
                return list(found.values())[op.offset : want]
            k = min(4 * k, MAX_SEARCH_K)

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        scope = listing_scope(conditions)
        namespaces = {s.namespace for s in self._items(scope.user_id, None)}
        kept = {ns for ns in namespaces if all(namespace_matches(c, ns) for c in conditions)}
        if op.max_depth is not None:
            kept = {ns[: op.max_depth] for ns in kept}
        return sorted(kept)[op.offset : op.offset + op.limit]

    # -- writes (under the write lock) ------------------------------------------------------
    def _put(self, where: Address, key: str, value: Mapping[str, Any]) -> None:
        text = entry_text(value)
        turn_id = new_turn_id(where, key)  # checked before the first write, used if new
        found = self._find(where, key)
        if not found:
            self._create(where, key, text, turn_id)
            return
        keep, *extra = found
        if keep.entry.text != text:
            self._memory.update(keep.entry.id, text, where.user_id)
        self._remove(where.user_id, [s.entry for s in extra])

    def _create(self, where: Address, key: str, text: str, turn_id: str) -> None:
        body = text.removeprefix(f"{SPEAKER}: ")
        made = self._add(where, body, turn_id)
        if not made:  # the rule filter took it for small talk ("thanks!"): say it as an item
            made = self._add(where, f"Item: {body}", new_turn_id(where, key))
        if not made:
            raise ItemNotStoredError(
                f"the memory kept no entry of item {shown(key)} in {shown(where.namespace)}"
            )
        keep, *extra = made
        if keep.text != text:  # a long text came in pieces, or the note was reworded
            self._memory.update(keep.id, text, where.user_id)
        self._remove(where.user_id, extra)

    def _add(self, where: Address, content: str, turn_id: str) -> list[MemoryEntry]:
        """The entries an add of one turn made of it."""
        said = Message(role="user", content=content, speaker=SPEAKER, turn_id=turn_id)
        result = self._memory.add([said], where.user_id, where.session_id)
        return [e for e in result.entries if turn_id in e.source_turn_ids]

    def _delete(self, where: Address, key: str) -> None:
        self._remove(where.user_id, [s.entry for s in self._find(where, key)])

    def _remove(self, user_id: str, entries: Iterable[MemoryEntry]) -> None:
        for entry in entries:
            try:
                self._memory.delete(entry.id, user_id)
            except MemoryNotFoundError:  # deleted meanwhile: gone, as wanted
                continue


__all__ = [
    "ItemKeyError",
    "ItemNotStoredError",
    "ItemValueError",
    "NamespaceError",
    "TiermemStore",
]
