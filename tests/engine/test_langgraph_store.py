"""``TiermemStore`` through LangGraph's ``BaseStore`` interface only: every case runs on the
synchronous methods and on their async twins, over a model-free memory (hash embedder)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import timedelta
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
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
)
from tiermem import InvalidInputError, ManualClock, Memory
from tiermem.integrations.langgraph import NamespaceError, TiermemStore

from tests.conftest import ON_DISK, T0, MemoryFactory, chat


class Face:
    """The store's synchronous methods, or their ``a``-prefixed twins run to completion."""

    def __init__(self, store: BaseStore, awaited: bool) -> None:
        self.store = store
        self.awaited = awaited

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.awaited:
            return asyncio.run(getattr(self.store, f"a{name}")(*args, **kwargs))
        return getattr(self.store, name)(*args, **kwargs)

    def put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> None:
        self._call("put", namespace, key, value)

    def get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        return self._call("get", namespace, key)  # type: ignore[no-any-return]

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        self._call("delete", namespace, key)

    def search(self, prefix: tuple[str, ...], **kwargs: Any) -> list[SearchItem]:
        return self._call("search", prefix, **kwargs)  # type: ignore[no-any-return]

    def list_namespaces(self, **kwargs: Any) -> list[tuple[str, ...]]:
        return self._call("list_namespaces", **kwargs)  # type: ignore[no-any-return]

    def batch(self, ops: list[Op]) -> list[Result]:
        return self._call("batch", ops)  # type: ignore[no-any-return]


@pytest.fixture(params=["sync", "async"])
def face(request: pytest.FixtureRequest, memory: Memory) -> Face:
    return Face(TiermemStore(memory), awaited=request.param == "async")


PREFS = ("alice", "prefs")


def keys(items: list[SearchItem]) -> list[str]:
    return [i.key for i in items]


def test_put_then_get_returns_the_value_dict_and_the_entry_times(face: Face) -> None:
    rich = {"content": "Alice is allergic to peanuts", "tags": ["health"], "n": 2, "ok": True}
    face.put(PREFS, "drink", {"text": "Alice drinks green tea"})
    face.put(PREFS, "allergy", rich)
    drink, allergy = face.get(PREFS, "drink"), face.get(PREFS, "allergy")
    assert drink is not None
    assert allergy is not None
    assert drink.value == {"text": "Alice drinks green tea"}
    assert allergy.value == rich
    assert (allergy.namespace, allergy.key) == (PREFS, "allergy")
    assert allergy.created_at == allergy.updated_at == T0
    assert face.get(PREFS, "nothing") is None
    assert face.get(("alice", "other"), "drink") is None  # the key is per namespace


def test_a_second_put_of_a_key_updates_its_item(face: Face, clock: ManualClock) -> None:
    face.put(PREFS, "drink", {"text": "Alice drinks green tea"})
    clock.advance(timedelta(hours=1))
    face.put(PREFS, "drink", {"text": "Alice drinks black coffee now", "since": "May"})
    item = face.get(PREFS, "drink")
    assert item is not None
    assert item.value == {"text": "Alice drinks black coffee now", "since": "May"}
    assert (item.created_at, item.updated_at) == (T0, T0 + timedelta(hours=1))
    assert keys(face.search(PREFS)) == ["drink"]  # one item, not two


def test_delete_and_a_put_of_none_remove_the_item_and_the_key_can_come_back(face: Face) -> None:
    face.put(PREFS, "drink", {"text": "Alice drinks green tea"})
    face.put(PREFS, "city", {"text": "Alice lives in Porto"})
    face.delete(PREFS, "drink")
    face.batch([PutOp(PREFS, "city", None)])
    assert face.get(PREFS, "drink") is None
    assert face.get(PREFS, "city") is None
    assert face.search(PREFS) == []
    face.delete(PREFS, "never-there")  # deleting nothing is no error
    face.put(PREFS, "drink", {"text": "Alice drinks mint tea"})
    item = face.get(PREFS, "drink")
    assert item is not None
    assert item.value == {"text": "Alice drinks mint tea"}


def test_a_query_search_puts_the_matching_item_first_with_its_score(face: Face) -> None:
    face.put(PREFS, "drink", {"text": "Alice drinks green tea every morning"})
    face.put(PREFS, "city", {"text": "Alice lives in Porto near the river"})
    face.put(("alice", "work"), "job", {"text": "Alice repairs bicycles for a living"})
    found = face.search(("alice",), query="which city does Alice live in? Porto")
    assert found[0].key == "city"
    assert found[0].namespace == PREFS
    assert found[0].score is not None
    scores = [i.score for i in found if i.score is not None]
    assert scores == sorted(scores, reverse=True)
    in_work = face.search(("alice", "work"), query="Porto river city")
    assert keys(in_work) == ["job"]  # the prefix bounds the search


def test_filter_keeps_the_items_whose_fields_match(face: Face) -> None:
    face.put(PREFS, "a", {"text": "Alice likes jazz", "kind": "music", "rating": 5})
    face.put(PREFS, "b", {"text": "Alice likes rock", "kind": "music", "rating": 2})
    face.put(PREFS, "c", {"text": "Alice likes chess", "kind": "game", "rating": 4})
    assert sorted(keys(face.search(PREFS, filter={"kind": "music"}))) == ["a", "b"]
    high = face.search(PREFS, filter={"kind": "music", "rating": {"$gte": 4}})
    assert keys(high) == ["a"]
    queried = face.search(PREFS, query="Alice likes chess", filter={"kind": "music"})
    assert sorted(keys(queried)) == ["a", "b"]  # the best match is filtered out


def test_a_listing_covers_deeper_namespaces_newest_first_and_pages(
    face: Face, clock: ManualClock
) -> None:
    for i, ns in enumerate([PREFS, (*PREFS, "food"), ("alice", "work"), ("alice",)]):
        clock.advance(timedelta(minutes=1))
        face.put(ns, f"k{i}", {"text": f"Alice fact number {i}", "i": i})
    assert keys(face.search(PREFS)) == ["k1", "k0"]
    assert keys(face.search(("alice",))) == ["k3", "k2", "k1", "k0"]
    assert keys(face.search(("alice",), limit=2, offset=1)) == ["k2", "k1"]
    root = face.get(("alice",), "k3")
    assert root is not None
    assert root.namespace == ("alice",)


def test_list_namespaces_by_prefix_suffix_and_depth(face: Face) -> None:
    for ns in [("alice",), PREFS, (*PREFS, "food"), ("alice", "work", "food"), ("bob", "x")]:
        face.put(ns, "k", {"text": f"something about {'/'.join(ns)}"})
    assert face.list_namespaces(prefix=("alice",)) == [
        ("alice",),
        ("alice", "prefs"),
        ("alice", "prefs", "food"),
        ("alice", "work", "food"),
    ]
    assert face.list_namespaces(prefix=("alice",), max_depth=2) == [
        ("alice",),
        ("alice", "prefs"),
        ("alice", "work"),
    ]
    assert face.list_namespaces(prefix=("alice", "*", "food")) == [
        ("alice", "prefs", "food"),
        ("alice", "work", "food"),
    ]
    assert face.list_namespaces(prefix=("alice",), suffix=("food",), limit=1, offset=1) == [
        ("alice", "work", "food")
    ]


def test_two_users_namespaces_are_isolated(face: Face) -> None:
    face.put(("alice", "prefs"), "drink", {"text": "Alice drinks green tea"})
    face.put(("bob", "prefs"), "drink", {"text": "Bob drinks espresso"})
    alice, bob = face.get(("alice", "prefs"), "drink"), face.get(("bob", "prefs"), "drink")
    assert alice is not None
    assert alice.value == {"text": "Alice drinks green tea"}
    assert bob is not None
    assert bob.value == {"text": "Bob drinks espresso"}
    assert [i.value["text"] for i in face.search(("bob",), query="espresso tea")] == [
        "Bob drinks espresso"
    ]
    face.delete(("bob", "prefs"), "drink")
    assert face.get(("alice", "prefs"), "drink") is not None
    assert face.list_namespaces(prefix=("bob",)) == []


@pytest.mark.parametrize(
    ("namespace", "why"),
    [
        ((), "user id"),
        (("u" * 200,), "at most 128"),
        (("Jose\u0301",), "NFC"),
        (("alice", "s\u0007"), "session id"),
    ],
)
def test_a_namespace_that_cannot_map_is_refused_and_its_batch_stores_nothing(
    face: Face, namespace: tuple[str, ...], why: str
) -> None:
    with pytest.raises(NamespaceError, match=why) as refused:
        face.batch([PutOp(PREFS, "ok", {"text": "Alice drinks tea"}), PutOp(namespace, "k", {})])
    assert isinstance(refused.value, InvalidNamespaceError)
    assert isinstance(refused.value, InvalidInputError)
    assert face.get(PREFS, "ok") is None


def test_search_and_listing_need_a_user(face: Face) -> None:
    with pytest.raises(NamespaceError, match="no list of users"):
        face.search((), query="tea")
    with pytest.raises(NamespaceError, match="no list of users"):
        face.list_namespaces()
    with pytest.raises(NamespaceError, match="no list of users"):
        face.list_namespaces(prefix=("*", "prefs"))


def test_a_batch_runs_in_order_and_answers_each_op(face: Face) -> None:
    results = face.batch(
        [
            GetOp(PREFS, "drink"),
            PutOp(PREFS, "drink", {"text": "Alice drinks green tea"}),
            GetOp(PREFS, "drink"),
            SearchOp(("alice",), query="green tea"),
            ListNamespacesOp((MatchCondition("prefix", ("alice",)),)),
        ]
    )
    before, put, after, found, spaces = results
    assert before is None
    assert put is None
    assert isinstance(after, Item)
    assert after.value == {"text": "Alice drinks green tea"}
    assert isinstance(found, list)
    assert [i.key for i in found] == ["drink"]  # type: ignore[union-attr]
    assert spaces == [PREFS]


def test_small_talk_and_long_values_are_kept_whole_as_one_item(face: Face) -> None:
    long_text = " ".join(f"word{i}" for i in range(300))
    values: dict[str, dict[str, Any]] = {
        "thanks": {"text": "thanks!"},
        "hello": {"hello": "there"},
        "long": {"text": long_text},
        "padded": {"text": "  spaced  "},
        "json-like": {"text": '{"a": 1}'},
    }
    for key, value in values.items():
        face.put(PREFS, key, value)
    for key, value in values.items():
        item = face.get(PREFS, key)
        assert item is not None, key
        assert item.value == value, key
    assert sorted(keys(face.search(PREFS, limit=20))) == sorted(values)


def test_conversation_memories_are_not_items_and_forget_user_erases_items(
    face: Face, memory: Memory
) -> None:
    memory.add(chat(("user", "I adopted a cat named Miso.")), user_id="alice", session_id="prefs")
    face.put(PREFS, "pet", {"text": "Alice has a cat named Miso"})
    assert keys(face.search(PREFS)) == ["pet"]
    assert keys(face.search(PREFS, query="cat named Miso")) == ["pet"]
    face.delete(PREFS, "pet")  # no memory keeps the item's text (no exchange with the chat)
    assert not [e for e in memory.get_all("alice") if "Alice has a cat" in e.text]
    face.put(PREFS, "pet", {"text": "Alice has a cat named Miso"})
    memory.forget_user("alice")
    assert face.get(PREFS, "pet") is None


@pytest.mark.parametrize("location", ON_DISK)
def test_a_reopened_store_still_finds_items_by_key(
    make_memory: MemoryFactory, location: str
) -> None:
    first = make_memory(location)
    TiermemStore(first).put(PREFS, "drink", {"text": "Alice drinks green tea", "cups": 2})
    first.close()
    store = TiermemStore(make_memory(location))
    item = store.get(PREFS, "drink")
    assert item is not None
    assert item.value == {"text": "Alice drinks green tea", "cups": 2}
    store.put(PREFS, "drink", {"text": "Alice drinks no tea"})
    assert keys(store.search(PREFS)) == ["drink"]


class State(TypedDict):
    user: str
    fact: str
    recalled: list[str]


def remember(state: State, runtime: Runtime[None]) -> dict[str, Any]:
    store = runtime.store
    assert store is not None
    namespace = (state["user"], "memories")
    store.put(namespace, "fact-1", {"text": state["fact"]})
    return {"recalled": [i.value["text"] for i in store.search(namespace, query=state["fact"])]}


def test_a_langgraph_graph_uses_it_as_its_store(memory: Memory) -> None:
    store = TiermemStore(memory)
    graph = StateGraph(State)
    graph.add_node("remember", remember)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", END)
    app = graph.compile(store=store)
    out = app.invoke({"user": "alice", "fact": "Alice keeps bees on the roof", "recalled": []})
    assert out["recalled"] == ["Alice keeps bees on the roof"]
    assert store.list_namespaces(prefix=("alice",)) == [("alice", "memories")]


def test_without_the_extra_the_import_names_it() -> None:
    # A process where langgraph cannot be imported: the store's module says which extra to
    # install, as a ConfigError, before its mapping module (which assumes langgraph) loads.
    probe = (
        "import sys; sys.modules['langgraph'] = None\n"
        "from tiermem.errors import ConfigError\n"
        "try:\n"
        "    import tiermem.integrations.langgraph\n"
        "except ConfigError as exc:\n"
        "    print('refused:', exc)\n"
        "print('mapping loaded:', 'tiermem.integrations.langgraph_mapping' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "refused: " in done.stdout
    assert "pip install 'tiermem[langgraph]'" in done.stdout
    assert "mapping loaded: False" in done.stdout
