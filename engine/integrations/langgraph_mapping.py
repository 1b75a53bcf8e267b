"""How LangGraph's namespaces, keys and values map onto tiermem users, sessions and entries,
and LangGraph's search filters and namespace conditions: pure functions, no memory call.
``tiermem.integrations.langgraph`` (whose docstring says how they map) serves them as a
``BaseStore``; import it, not this module, which assumes the langgraph extra installed."""

from __future__ import annotations

import json
import operator
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)
from tiermem.errors import (
    InvalidFilterError,
    InvalidInputError,
    InvalidSessionIdError,
    InvalidUserIdError,
    shown,
)
from tiermem.types import MemoryEntry
from tiermem.validation import (
    MAX_ID_LENGTH,
    MAX_MEMORY_TEXT_CHARS,
    text_fault,
    validate_session_id,
    validate_user_id,
)

SPEAKER = "note"  # who an item's turn is said by: its entry reads "note: ..."
TURN_PREFIX = "lg-"
_TURN_ID = re.compile(r"lg-[0-9a-f]{12}-(\[.*\])", re.DOTALL)


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
    tiermem.integrations.langgraph_mapping.NamespaceError: namespace () cannot map to tiermem: ...
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


def check_op(op: Op) -> None:
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


__all__ = [
    "SPEAKER",
    "TURN_PREFIX",
    "Address",
    "ItemKeyError",
    "ItemValueError",
    "NamespaceError",
    "StoredItem",
    "address_of",
    "check_op",
    "entry_text",
    "labels_and_key",
    "listing_scope",
    "matches",
    "namespace_matches",
    "new_turn_id",
    "search_scope",
    "stored_item",
    "value_of",
]
