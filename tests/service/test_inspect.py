"""The inspector's page and routes (``/inspect``, ``/v1/inspect/*``) on the service: what the
page shows is what ``Memory`` builds, it counts no retrieval, and it reaches nothing of another
tenant's or another user's, with or without a key, under any look-alike id."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from tiermem import Memory, TiermemConfig
from tiermem.bench.demo_data import DEMO_USERS, session_messages
from tiermem.generator import NOTHING_IN_MEMORY
from tiermem.remote import RemoteMemory
from tiermem.service.keys import add_key

from tests.fakes.scripted import ScriptedModels
from tests.offline.conftest import ltm_config, one_node_per_memory
from tests.service.conftest import Keys, in_thread, make_keys

FLIGHT = "I moved my flight one day earlier to 9 October"


def ingest_demo(face: Any) -> None:
    """The demo's two users, Maya (flight moved to 9 October) and Leo, session by session."""
    for user in DEMO_USERS:
        for session in user.sessions:
            face.add(session_messages(user, session), user.user_id, session.session_id)


@dataclass(frozen=True)
class Inspected:
    memory: Memory
    url: str
    keys: Keys
    lookalike: str  # tenant "acme2": a name that starts as acme's does

    def http(self, key: str | None) -> httpx.Client:
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def inspected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inspected]:
    root = tmp_path_factory.mktemp("inspect")
    keys = make_keys(root)
    lookalike = add_key(keys.path, "acme2")
    with (
        Memory(TiermemConfig.for_tests()) as memory,
        in_thread(memory, keys) as url,
        RemoteMemory(url, keys.acme) as acme,
    ):
        ingest_demo(acme)
        yield Inspected(memory, url, keys, lookalike)


def test_the_page_loads_without_a_key_and_holds_no_data(inspected: Inspected) -> None:
    with inspected.http(None) as http:
        page = http.get("/inspect")
        script = http.get("/inspect/inspect.js")
        style = http.get("/inspect/inspect.css")
        assert http.get("/inspect/keys.json").status_code == 404
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "maya" not in page.text.lower()
    assert script.headers["content-type"].startswith("text/javascript")
    assert "innerHTML" not in script.text  # every value is written as text
    assert style.status_code == 200


def test_users_are_the_tenants_own(inspected: Inspected) -> None:
    keys = inspected.keys
    with inspected.http(keys.acme) as acme, inspected.http(keys.beta) as beta:
        assert beta.post("/v1/memories", json={"messages": "I fly kites.", "user_id": "kim"})
        mine = acme.get("/v1/inspect/users").json()
        theirs = beta.get("/v1/inspect/users").json()
    assert mine == {
        "tenant": "acme",
        "admin": False,
        "read_only": False,
        "ltm": False,
        "users": ["leo", "maya"],
    }
    assert theirs["users"] == ["kim"]
    with inspected.http(inspected.lookalike) as lookalike:
        assert lookalike.get("/v1/inspect/users").json()["users"] == []


def test_the_traced_context_is_the_memorys_own(inspected: Inspected) -> None:
    """The units replayed deliver exactly what ``Memory.context`` delivers, token for token,
    and the 9 October turn is among them with its hit's score explanation."""
    query = {"query": "When is my flight?", "user_id": "maya", "budget_tokens": 300}
    with inspected.http(inspected.keys.acme) as http:
        trace = http.post("/v1/inspect/context", json=query).json()
    ctx = inspected.memory.context("When is my flight?", "acme:maya", 300)
    assert trace["context"]["text"] == ctx.text
    assert trace["context"]["tokens"] == ctx.tokens <= 300
    kept = [u for u in trace["units"] if u["kept"]]
    assert {t for u in kept for t in u["turn_ids"]} == set(ctx.turn_ids)
    assert sum(u["tokens"] for u in kept) == ctx.tokens
    assert any(not u["kept"] and "budget" in u["reason"] for u in trace["units"])
    flight = next(
        u
        for u in kept
        if u["origin"] == "hit"
        and any(FLIGHT in trace["turns"][t]["content"] for t in u["turn_ids"])
    )
    hit = trace["hits"][flight["hit"]]
    assert {"dense", "rrf", "selector"} <= set(hit["explanation"]["components"])
    turn = trace["turns"][flight["turn_ids"][0]]
    assert (turn["speaker"], turn["session_id"], turn["user_id"]) == ("Maya", "maya-s4", "maya")
    assert "acme" not in str(trace)  # the stored id never leaves the service


def test_the_traced_answer_says_why_it_refused(inspected: Inspected) -> None:
    with inspected.http(inspected.keys.acme) as http:
        flight = http.post(
            "/v1/inspect/answer", json={"query": "When is my flight?", "user_id": "maya"}
        )
        peru = http.post(
            "/v1/inspect/answer", json={"query": "What is the capital of Peru?", "user_id": "maya"}
        )
    assert flight.json()["refused"] is None
    assert (
        flight.json()["answer"] == inspected.memory.answer("When is my flight?", "acme:maya").text
    )
    assert peru.json()["answer"] == NOTHING_IN_MEMORY
    assert "shares a content word" in peru.json()["refused"]


def test_inspecting_counts_no_retrieval(inspected: Inspected) -> None:
    before = {e.id: e.access_count for e in inspected.memory.get_all("acme:leo")}
    with inspected.http(inspected.keys.acme) as http:
        for route in ("context", "answer"):
            traced = http.post(f"/v1/inspect/{route}", json={"query": "my dog", "user_id": "leo"})
            assert traced.json()["hits"]
    assert {e.id: e.access_count for e in inspected.memory.get_all("acme:leo")} == before


def test_knowledge_says_when_ltm_is_off(inspected: Inspected) -> None:
    with inspected.http(inspected.keys.acme) as http:
        answer = http.get("/v1/inspect/knowledge", params={"user_id": "maya"})
    assert answer.json() == {"enabled": False, "items": []}


NEW_ROUTES = [
    ("GET", "/v1/inspect/users", None, None),
    ("POST", "/v1/inspect/context", None, {"query": "flight", "user_id": "maya"}),
    ("POST", "/v1/inspect/answer", None, {"query": "flight", "user_id": "maya"}),
    ("GET", "/v1/inspect/knowledge", {"user_id": "maya"}, None),
]


@pytest.mark.parametrize(("method", "path", "params", "body"), NEW_ROUTES)
@pytest.mark.parametrize("header", [None, "Bearer tmk_not-a-key", "Basic dXNlcjpwYXNz"])
def test_every_inspector_route_needs_a_key(
    inspected: Inspected,
    method: str,
    path: str,
    params: dict[str, str] | None,
    body: dict[str, str] | None,
    header: str | None,
) -> None:
    headers = {} if header is None else {"Authorization": header}
    answer = httpx.request(
        method, inspected.url + path, params=params, json=body, headers=headers, timeout=10
    )
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "authentication_failed"
    assert "Maya" not in answer.text


@pytest.mark.parametrize("user", ["maya", "acme:maya", "acme%3Amaya", "maya ", " maya"])
def test_another_tenant_reaches_nothing_of_maya(inspected: Inspected, user: str) -> None:
    """beta, and acme2 (a look-alike tenant name), under Maya's id or acme's stored form of
    it: nothing of hers, through every route the page uses."""
    acme_entry = inspected.memory.get_all("acme:maya")[0]
    for key in (inspected.keys.beta, inspected.lookalike):
        with inspected.http(key) as http:
            listed = http.get("/v1/memories", params={"user_id": user})
            traced = http.post("/v1/inspect/context", json={"query": "flight", "user_id": user})
            history = http.get(f"/v1/memories/{acme_entry.id}/history", params={"user_id": user})
            turns = http.post(
                "/v1/source-turns",
                json={
                    "user_id": user,
                    "hits": [
                        {
                            "item": {**_entry_json(inspected, acme_entry), "user_id": user},
                            "score": 0.0,
                            "explanation": {"components": {}, "note": ""},
                        }
                    ],
                },
            )
            knowledge = http.get("/v1/inspect/knowledge", params={"user_id": user})
        bodies = [listed, traced, history, turns, knowledge]
        assert all(b.status_code in (200, 404, 422) for b in bodies), [b.text for b in bodies]
        assert listed.status_code != 200 or listed.json() == []
        assert traced.status_code != 200 or traced.json()["hits"] == []
        assert history.status_code in (404, 422)
        assert turns.status_code != 200 or turns.json() == {}
        assert not any("TP1351" in b.text or "Maya" in b.text for b in bodies)


def _entry_json(inspected: Inspected, entry: Any) -> dict[str, Any]:
    from tiermem.service import wire
    from tiermem.types import MemoryEntry

    data: dict[str, Any] = wire.encode(entry, MemoryEntry)
    return data


def test_erasing_from_the_page_is_the_keys_own_right(tmp_path: Path) -> None:
    """The page's erase is ``DELETE /v1/users/{id}``: another tenant's erase of "maya" erases
    its own (empty) user, never acme's."""
    keys = make_keys(tmp_path)
    with Memory(TiermemConfig.for_tests()) as memory, in_thread(memory, keys) as url:
        with RemoteMemory(url, keys.acme) as acme:
            ingest_demo(acme)
        beta = {"Authorization": f"Bearer {keys.beta}"}
        erased = httpx.delete(f"{url}/v1/users/maya", headers=beta, timeout=30).json()
        assert erased["entries"] == 0
        assert memory.get_all("acme:maya")
        acme_key = {"Authorization": f"Bearer {keys.acme}"}
        report = httpx.delete(f"{url}/v1/users/maya", headers=acme_key, timeout=30).json()
        users = httpx.get(f"{url}/v1/inspect/users", headers=acme_key, timeout=30).json()
    assert report["entries"] > 0
    assert report["turns"] > 0
    assert users["users"] == ["leo"]


def test_knowledge_is_what_the_users_own_memories_fed(
    tmp_path: Path, scripted_models: ScriptedModels
) -> None:
    """Ana's and Bob's memories both feed "sunday"; only Bob's feed "bees". Ana's page shows
    "sunday" (one of its two supports hers) and "flour", never "bees", and no user id; Bob's
    tenant sees nothing of Ana under her id."""
    scripted_models.serve("scripted", one_node_per_memory)
    keys = make_keys(tmp_path)
    with (
        Memory(ltm_config(tmp_path / "data", "scripted")) as memory,
        in_thread(memory, keys) as url,
        RemoteMemory(url, keys.acme) as acme,
        RemoteMemory(url, keys.beta) as beta,
    ):
        for sentence in ("Ana bakes sourdough every Sunday.", "Ana's sourdough uses rye flour."):
            acme.add(sentence, user_id="ana")
        for sentence in ("Bob sails on Sunday.", "Bob keeps bees."):
            beta.add(sentence, user_id="bob")
        acme.consolidate_now("ana")
        beta.consolidate_now("bob")
        mine, theirs = (
            httpx.get(
                f"{url}/v1/inspect/knowledge",
                params={"user_id": "ana"},
                headers={"Authorization": f"Bearer {key}"},
                timeout=30,
            ).json()
            for key in (keys.acme, keys.beta)
        )
    items = {i["text"].split(" (")[0]: i for i in mine["items"]}
    assert mine["enabled"] is True
    assert set(items) == {"sunday", "flour"}
    assert (items["sunday"]["evidence"], items["sunday"]["from_user"]) == (2, 1)
    assert (items["flour"]["evidence"], items["flour"]["from_user"]) == (1, 1)
    assert all(0 < i["confidence"] <= 1 and i["id"].startswith("ltm:") for i in mine["items"])
    assert "acme" not in str(mine)
    assert "bob" not in str(mine).lower()
    assert theirs == {"enabled": True, "items": []}
