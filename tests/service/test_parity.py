"""One script through ``Memory`` and through ``RemoteMemory`` (and ``AsyncRemoteMemory``)
against a real uvicorn server on loopback gives the same results: the same values of the same
types, the caller's own user id, the same typed errors."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from tiermem import (
    AsyncMemory,
    InvalidLimitError,
    InvalidUserIdError,
    ManualClock,
    Memory,
    MemoryEntry,
    MemoryKind,
    SearchFilters,
    TiermemConfig,
)
from tiermem.errors import (
    EmptyMessagesError,
    InvalidFilterError,
    InvalidMemoryIdError,
    InvalidQueryError,
    KnowledgeItemError,
    MemoryNotFoundError,
    NaiveTimestampError,
    TiermemError,
    UnknownRoleError,
)
from tiermem.remote import AsyncRemoteMemory, RemoteMemory
from tiermem.service.wire import encode
from tiermem.validation import MAX_CONTENT_CHARS

from tests.conftest import T0, chat
from tests.engine.test_api_parity import _script
from tests.service.conftest import in_thread, make_keys

Call = Callable[..., Any]
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_ID = re.compile(rf"^(t_[0-9a-f]{{20}}(\.\d+)?|{_UUID})$")


def _full_script(call: Call) -> list[object]:
    """Every method of the client API, with filters and sessions; results kept whole."""
    out: list[object] = []
    first = call(
        "add",
        chat(("user", "I grow chillies."), ("assistant", "Hot ones?"), ("user", "Reapers.")),
        "ana",
        "s1",
    )
    later = call(
        "add",
        chat(("user", "Our choir sings on Fridays."), start=T0 + timedelta(days=3)),
        "ana",
        "s2",
    )
    out += [first, later]
    out.append(call("add", [{"content": "Ben plays chess.", "timestamp": T0}], "ben"))
    hits = call("search", "chillies", "ana", 3)
    out.append(hits)
    out.append(call("search", "choir", "ana", 2, SearchFilters(since=T0 + timedelta(days=1))))
    kinds = SearchFilters(kinds=(MemoryKind.TURN,), session_id="s1")
    out.append(call("search", "Reapers", "ana", 5, kinds, "s1"))
    out.append(call("source_turns", hits, "ana"))
    out.append(call("working_memory", "ana", "s1"))
    out.append(call("context", "chillies", "ana", 80, "s1", None, 4, False))
    out.append(call("answer", "what do I grow", "ana", "s1"))
    entry = first.entries[0].id
    out.append(call("update", entry, "Ana grows chillies and basil.", "ana"))
    out.append(call("get", entry, "ana"))
    out.append(call("history", entry, "ana"))
    out.append(_by_text(call("get_all", "ana", SearchFilters(until=T0 + timedelta(days=1)))))
    call("delete", entry, "ana")
    out.append(_by_text(call("get_all", "ana")))
    out.append(call("forget_user", "ana"))
    out.append(call("get_all", "ben"))
    return out


def _by_text(entries: list[MemoryEntry]) -> list[MemoryEntry]:
    """Entries of one time are listed in id order, and ids derive from the (stored) user id."""
    return sorted(entries, key=lambda e: (e.created_at, e.text))


def _errors(call: Call) -> list[tuple[str, str]]:
    """Bad calls: each face must raise the same class with the same message."""
    added = call("add", chat(("user", "Ana keeps bees.")), "ana")
    bad: list[tuple[str, tuple[object, ...]]] = [
        ("add", ([], "ana")),
        ("add", ([{"role": "robot", "content": "hi"}], "ana")),
        ("add", ([{"content": "hi", "timestamp": "2026-01-01T00:00:00"}], "ana")),
        ("add", ("hi", "")),
        ("add", ("hi", " ana")),
        ("search", ("x", "ana", 0)),
        ("search", ("", "ana")),
        ("search", ("x", "ana", 5, SearchFilters(since=T0, until=T0 - timedelta(days=1)))),
        ("get", ("no-such-id", "ana")),
        ("get", (added.entries[0].id, "bob")),  # another user's entry is not found
        ("get", ("", "ana")),
        ("update", ("ltm:n:1", "text", "ana")),
        ("delete", ("no-such-id", "ana")),
        ("history", ("no-such-id", "ana")),
        ("consolidation_state", ()),
    ]
    out = []
    for name, args in bad:
        try:
            call(name, *args)
        except TiermemError as exc:
            out.append((type(exc).__name__, re.sub(_UUID, "<id>", str(exc))))
        else:
            out.append(("no error", name))
    return out


def _canonical(results: list[object], kinds: list[Any]) -> list[object]:
    """Results as JSON, with generated ids named by order of first appearance: the service
    scopes user ids by tenant, and ids derived from a user id differ, as they should."""
    names: dict[str, str] = {}

    def rename(value: object) -> object:
        if isinstance(value, str) and _ID.match(value):
            return names.setdefault(value, f"id{len(names)}")
        if isinstance(value, dict):
            return {rename(k): rename(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rename(v) for v in value]
        return value

    return [rename(encode(r, k)) for r, k in zip(results, kinds, strict=True)]


def _faces(tmp_path: Path, script: Callable[[Call], list[object]]) -> tuple[list[object], ...]:
    keys = make_keys(tmp_path)
    with Memory(TiermemConfig.for_tests(), clock=ManualClock(T0)) as local:
        embedded = script(lambda name, *a: getattr(local, name)(*a))
    with (
        Memory(TiermemConfig.for_tests(), clock=ManualClock(T0)) as served,
        in_thread(served, keys) as url,
        RemoteMemory(url, keys.admin) as remote,  # admin: consolidation_state too
    ):
        over_http = script(lambda name, *a: getattr(remote, name)(*a))
    return embedded, over_http


def test_the_parity_script_gives_the_same_results(tmp_path: Path) -> None:
    embedded, over_http = _faces(tmp_path, _script)
    assert over_http == embedded
    assert embedded[-1] == (4, 3, 7)


def test_every_method_gives_the_same_values_of_the_same_types(tmp_path: Path) -> None:
    embedded, over_http = _faces(tmp_path, _full_script)
    assert [type(r) for r in over_http] == [type(r) for r in embedded]
    kinds = [type(r) if not isinstance(r, list | tuple | dict) else Any for r in embedded]
    assert _canonical(over_http, kinds) == _canonical(embedded, kinds)
    # the caller's own user id, never the stored tenant:user
    assert {e.user_id for e in over_http[0].entries} == {"ana"}
    assert {h.entry.user_id for h in over_http[3]} == {"ana"}
    assert all(t.user_id == "ana" for t in over_http[7])


def test_a_bad_call_raises_the_same_error_on_both_faces(tmp_path: Path) -> None:
    embedded, over_http = _faces(tmp_path, _errors)
    assert over_http == embedded
    names = [name for name, _ in embedded]
    for cls in (
        EmptyMessagesError,
        UnknownRoleError,
        NaiveTimestampError,
        InvalidUserIdError,
        InvalidLimitError,
        InvalidQueryError,
        InvalidFilterError,
        MemoryNotFoundError,
        InvalidMemoryIdError,
        KnowledgeItemError,
    ):
        assert cls.__name__ in names


def test_a_served_error_is_the_memory_error_class_with_its_attributes(tmp_path: Path) -> None:
    """The service's own answer (not the client's local check) maps back to the class."""
    keys = make_keys(tmp_path)
    with Memory(TiermemConfig.for_tests(), clock=ManualClock(T0)) as memory:
        added = memory.add("Ana keeps bees.", user_id="acme:ana")  # acme's ana, as stored
        entry = added.entries[0].id
        with in_thread(memory, keys) as url, RemoteMemory(url, keys.acme) as remote:
            assert remote.get(entry, "ana").text == added.entries[0].text
            with pytest.raises(MemoryNotFoundError) as missing:
                remote.get(entry, "bob")
            with pytest.raises(KnowledgeItemError) as knowledge:
                remote.history("ltm:n:1f", "ana")
    assert (missing.value.memory_id, missing.value.user_id) == (entry, "bob")
    assert knowledge.value.operation == "history"
    assert isinstance(knowledge.value, MemoryNotFoundError)


def test_the_async_client_agrees_with_the_async_memory(tmp_path: Path) -> None:
    keys = make_keys(tmp_path)

    async def run(face: Any) -> list[object]:
        loop = asyncio.get_running_loop()

        def call(name: str, *args: Any) -> Any:
            return asyncio.run_coroutine_threadsafe(getattr(face, name)(*args), loop).result()

        return await asyncio.to_thread(_script, call)

    async def embedded() -> list[object]:
        async with AsyncMemory(TiermemConfig.for_tests(), clock=ManualClock(T0)) as memory:
            return await run(memory)

    with (
        Memory(TiermemConfig.for_tests(), clock=ManualClock(T0)) as served,
        in_thread(served, keys) as url,
    ):

        async def remote() -> list[object]:
            async with AsyncRemoteMemory(url, keys.acme) as client:
                return await run(client)

        assert asyncio.run(remote()) == asyncio.run(embedded())


def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}


def test_the_clients_have_every_method_of_memory() -> None:
    """A method added to Memory alone fails here (from_defaults builds a local memory)."""
    wanted = _public(Memory) - {"from_defaults"}
    assert _public(RemoteMemory) == wanted
    assert _public(AsyncRemoteMemory) == wanted
    for name in wanted:
        assert asyncio.iscoroutinefunction(getattr(AsyncRemoteMemory, name)), name


def _add_outcome(call: Call, messages: object) -> tuple[object, ...]:
    try:
        result = call("add", messages, "ana")
    except TiermemError as exc:
        return (type(exc).__name__, str(exc))
    return ("added", len(result.turns), result.empty_messages)


def test_a_long_non_ascii_message_memory_takes_is_taken_over_http(tmp_path: Path) -> None:
    """Memory takes a message of up to MAX_CONTENT_CHARS characters; so must the service
    with its default limits (the client escapes every non-ASCII character as \\uXXXX)."""
    document = "Notes: " + "Приветмир " * 24_000  # 240,007 characters, under the limit
    assert len(document) <= MAX_CONTENT_CHARS
    embedded, over_http = _faces(tmp_path, lambda call: [_add_outcome(call, [document])])
    assert embedded == [("added", 1, ())]
    assert over_http == embedded


def test_a_blank_message_over_the_length_limit_is_left_out_on_both_faces(tmp_path: Path) -> None:
    messages = [{"role": "assistant", "content": " " * (MAX_CONTENT_CHARS + 1)}, "Ana keeps bees."]
    embedded, over_http = _faces(tmp_path, lambda call: [_add_outcome(call, messages)])
    assert embedded == [("added", 1, (0,))]
    assert over_http == embedded
