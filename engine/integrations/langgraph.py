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
import json
import operator
import re
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tiermem.api import MemoryAPI
from tiermem.errors import (
    ConfigError,
    InvalidFilterError,
    InvalidInputError,
    InvalidSessionIdError,
    InvalidUserIdError,
    MemoryNotFoundError,
    TiermemError,
    shown,
)
from tiermem.types import MemoryEntry, Message, SearchFilters, Tier
from tiermem.validation import (
    DEFAULT_SESSION,
    MAX_ID_LENGTH,
    MAX_MEMORY_TEXT_CHARS,
    text_fault,
    validate_session_id,
    validate_user_id,
)

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        validate_op_namespace,
    )
except ImportError as exc:  # the extra is not installed
    raise ConfigError(
        "tiermem.integrations.langgraph needs 'langgraph', from the langgraph extra: "
        "pip install 'tiermem[langgraph]'"
    ) from exc

SPEAKER = "note"  # who an item's turn is said by: its entry reads "note: ..."
TURN_PREFIX = "lg-"
_TURN_ID = re.compile(r"lg-[0-9a-f]{12}-(\[.*\])", re.DOTALL)
# A query search asks tiermem for this many hits at most (the service's default max_k).
MAX_SEARCH_K = 100


class NamespaceError(InvalidInputError, InvalidNamespaceError):
    """A namespace maps to no tiermem user and session. Nothing was stored."""

    def __init__(self, namespace: object, reason: str) -> None:
        self.namespace = namespace
        self.reason = reason
        super().__init__(f"namespace {shown(namespace)} cannot map to tiermem: {reason}")


class ItemKeyError(InvalidInputError):
    """The namespace's labels and the key do not fit the id of the item's turn."""

    def __init__(self, namespace: tuple[str, ...], key: str) -> None:
        self.namespace = namespace
        self.key = key
        super().__init__(
            f"key {shown(key)} in {shown(namespace)} is too long: the labels after the user and "
            f"the key, as JSON, must fit a turn id of {MAX_ID_LENGTH} characters"
        )


class ItemValueError(InvalidInputError):
    """A value tiermem cannot keep as one entry's text (not JSON, too long). Nothing stored."""


class ItemNotStoredError(TiermemError):
    """The memory made no entry of a put's turn (its writer merged it into another memory)."""


@dataclass(frozen=True, slots=True)
class Address:
    """Where a namespace's items live: the tiermem user, its session, the labels after it."""

    user_id: str
    labels: tuple[str, ...]

    @property
    def session_id(self) -> str | None:
        return self.labels[0] if self.labels else None

    @property
    def namespace(self) -> tuple[str, ...]:
        return (self.user_id, *self.labels)


@dataclass(frozen=True, slots=True)
class StoredItem:
    """An entry that is an item, with the namespace, key and value read back from it."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    entry: MemoryEntry

    def as_item(self) -> Item:
        return Item(
            value=self.value,
            key=self.key,
            namespace=self.namespace,
            created_at=self.entry.created_at,
            updated_at=self.entry.updated_at,
        )

    def as_search_item(self, score: float | None) -> SearchItem:
        e = self.entry
        return SearchItem(self.namespace, self.key, self.value, e.created_at, e.updated_at, score)


# -- the mapping (pure) ---------------------------------------------------------------------
def _exact(namespace: Sequence[str], label: str, check: Callable[[object], str], what: str) -> str:
    try:
        normal = check(label)
    except (InvalidUserIdError, InvalidSessionIdError) as exc:
        raise NamespaceError(namespace, f"its {what} {exc.reason}") from exc
    if normal != label:
        raise NamespaceError(namespace, f"its {what} is not in Unicode NFC")
    return normal


def address_of(namespace: Sequence[str]) -> Address:
    """The user and session a namespace maps to, or ``NamespaceError``.

    >>> address_of(("alice", "s1", "notes")).session_id
    's1'
    >>> address_of(())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    tiermem.integrations.langgraph.NamespaceError: namespace () cannot map to tiermem: ...
    """
    if not isinstance(namespace, tuple) or not namespace:
        raise NamespaceError(namespace, "the first label must be the tiermem user id")
    user = _exact(namespace, namespace[0], validate_user_id, "user id")
    if len(namespace) > 1:
        _exact(namespace, namespace[1], validate_session_id, "session id")
    return Address(user, tuple(namespace[1:]))


_NO_USER_LIST = "tiermem keeps no list of users: the prefix must start with the user id"


def search_scope(prefix: tuple[str, ...]) -> Address:
    """What a search prefix covers: one user, and one session where it names one."""
    if not prefix:
        raise NamespaceError(prefix, _NO_USER_LIST)
    return address_of(prefix)


def listing_scope(conditions: Sequence[MatchCondition]) -> Address:
    """The user whose namespaces ``list_namespaces`` lists: a prefix condition must name it."""
    for c in conditions:
        if c.match_type == "prefix" and c.path and c.path[0] != "*":
            return address_of((c.path[0],))
    raise NamespaceError(tuple(c.path for c in conditions), _NO_USER_LIST)


def _check(op: Op) -> None:
    """Refuse an operation that cannot map before any operation of its batch runs."""
    validate_op_namespace(op)
    if isinstance(op, PutOp) and op.ttl is not None:
        raise NotImplementedError("TiermemStore keeps no TTLs (supports_ttl is false)")
    if isinstance(op, GetOp | PutOp):
        address_of(op.namespace)
    elif isinstance(op, SearchOp):
        search_scope(op.namespace_prefix)
    elif isinstance(op, ListNamespacesOp):
        listing_scope(op.match_conditions or ())
    else:
        raise InvalidInputError(f"unknown store operation {type(op).__name__}")


def new_turn_id(where: Address, key: str) -> str:
    """A fresh id for an item's turn, holding its labels and key (re-put after a delete needs
    a new turn: tiermem never re-adds a turn it has seen, nor an entry it deleted)."""
    payload = json.dumps([*where.labels, key], ensure_ascii=False, separators=(",", ":"))
    turn_id = f"{TURN_PREFIX}{secrets.token_hex(6)}-{payload}"
    if len(turn_id) > MAX_ID_LENGTH:
        raise ItemKeyError(where.namespace, key)
    return turn_id


def labels_and_key(turn_id: str) -> tuple[tuple[str, ...], str] | None:
    """What ``new_turn_id`` put in a turn id, or ``None`` for a turn that is no item's.

    >>> labels_and_key('lg-0123456789ab-["s1","notes","k.1"]')
    (('s1', 'notes'), 'k.1')
    """
    match = _TURN_ID.fullmatch(turn_id)
    if match is None:
        return None
    try:
        parts = json.loads(match.group(1))
    except ValueError:
        return None
    if not parts or not all(isinstance(p, str) for p in parts):
        return None
    return tuple(parts[:-1]), parts[-1]


def entry_text(value: Mapping[str, Any]) -> str:
    """The text of an item's entry: the value's text when it is all the value holds, else
    the value as compact JSON. ``value_of`` reads the value back.

    >>> entry_text({"text": "Alice drinks tea"}), entry_text({"text": "tea", "n": 2})
    ('note: Alice drinks tea', 'note: {"text":"tea","n":2}')
    """
    if not isinstance(value, Mapping):
        raise ItemValueError(f"a value must be a dict, got {type(value).__name__}")
    text = value.get("text")
    if len(value) == 1 and isinstance(text, str) and _plain(text):
        body = text
    else:
        try:
            body = json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise ItemValueError(f"a value must be JSON: {exc}") from exc
    full = f"{SPEAKER}: {body}"
    fault = text_fault(full, MAX_MEMORY_TEXT_CHARS)
    if fault is not None:
        raise ItemValueError(f"a value as an entry's text {fault}")
    return full


def _plain(text: str) -> bool:
    """Whether a text reads back as itself: not blank, not padded, not JSON-like."""
    return bool(text) and text == text.strip() and not text.startswith("{")


def value_of(text: str) -> dict[str, Any]:
    """The value an entry's text holds (a text changed by hand reads as ``{"text": ...}``).

    >>> value_of('note: {"text":"tea","n":2}'), value_of("note: Alice drinks tea")
    ({'text': 'tea', 'n': 2}, {'text': 'Alice drinks tea'})
    """
    body = text.removeprefix(f"{SPEAKER}: ")
    if body.startswith("{"):
        try:
            value = json.loads(body)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    return {"text": body}


def stored_item(entry: MemoryEntry) -> StoredItem | None:
    """The item an entry is, or ``None`` for any other memory of the user."""
    if len(entry.source_turn_ids) != 1:
        return None
    found = labels_and_key(entry.source_turn_ids[0])
    if found is None:
        return None
    labels, key = found
    return StoredItem((entry.user_id, *labels), key, value_of(entry.text), entry)


# -- filters (pure) -------------------------------------------------------------------------
_ORDERED: dict[str, Callable[[float, float], bool]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


def matches(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """Whether a value passes a search filter.

    >>> matches({"kind": "pref", "n": 3}, {"kind": "pref", "n": {"$gte": 2}})
    True
    """
    return not wanted or all(_compare(value.get(k), w) for k, w in wanted.items())


def _compare(actual: object, wanted: object) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_apply(actual, str(op), w) for op, w in wanted.items())
        return isinstance(actual, Mapping) and all(
            _compare(actual.get(k), w) for k, w in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(wanted)
            and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return actual == wanted


def _apply(actual: object, op: str, wanted: object) -> bool:
    if op == "$eq":
        return actual == wanted
    if op == "$ne":
        return actual != wanted
    compare = _ORDERED.get(op)
    if compare is None:
        raise InvalidFilterError(f"unknown filter operator {shown(op)}")
    try:
        return compare(float(actual), float(wanted))  # type: ignore[arg-type]
    except (TypeError, ValueError):  # a missing or non-numeric field does not match
        return False


def namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """LangGraph's prefix or suffix condition, ``"*"`` matching any one label."""
    path = condition.path
    if len(namespace) < len(path):
        return False
    labels = (
        namespace if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    )
    return all(p in ("*", label) for p, label in zip(path, labels, strict=False))


# -- the store ------------------------------------------------------------------------------
class TiermemStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are the memories of a tiermem memory (the module
    docstring says how they map). Thread-safe: its writes are serialised."""

    def __init__(self, memory: MemoryAPI) -> None:
        self._memory = memory
        self._write_lock = threading.Lock()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        todo = list(ops)
        for op in todo:  # every namespace checked before anything is written
            _check(op)
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
