"""``tiermem mcp``: one user's memory as MCP tools, driven by the SDK's own client over stdio
(the real ``tiermem mcp`` entry point), streamable HTTP (uvicorn on loopback) and in process.
Every memory runs the hash embedder and the model-free roles: offline, seconds."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent, TextResourceContents
from tiermem import Memory
from tiermem.cli import main
from tiermem.mcp_server import RECENT_URI, build_server

from tests.conftest import MemoryFactory
from tests.service.conftest import serve_in_thread

HIT_FIELDS = {"id", "text", "score", "tier", "kind", "date", "source_turn_ids"}
TOOLS = {"remember", "search", "context", "get", "update", "delete", "history"}
LISBON = [
    {"role": "user", "content": "My sister Ana moved to Lisbon in May."},
    {"role": "assistant", "content": "Lisbon in spring must be lovely for her."},
]
PORTO = [{"role": "user", "content": "I am learning the cello with a teacher in Porto."}]
TIMEOUT_S = 60.0


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    anyio.run(scenario)


def data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


def error_code(result: CallToolResult) -> str:
    """The stable code of a tool error; its text content is the same JSON body."""
    assert result.is_error
    block = result.content[0]
    assert isinstance(block, TextContent)
    assert json.loads(block.text) == result.structured_content
    code: str = json.loads(block.text)["error"]["code"]
    return code


async def recent(client: Client) -> list[dict[str, Any]]:
    contents = (await client.read_resource(RECENT_URI)).contents
    assert isinstance(contents[0], TextResourceContents)
    memories: list[dict[str, Any]] = json.loads(contents[0].text)["memories"]
    return memories


def fields(schema: object) -> set[str]:
    """Every property name of a JSON schema, nested ones too."""
    if isinstance(schema, list):
        return set().union(*(fields(x) for x in schema))
    if not isinstance(schema, dict):
        return set()
    found = set(schema.get("properties", {}))
    return found.union(*(fields(v) for v in schema.values()))


async def tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


def test_stdio_serves_every_tool_of_the_cli_user(tmp_path: Path) -> None:
    command = [
        *("-m", "tiermem.cli", "mcp", "--user", "maya", "--data-dir", str(tmp_path / "data")),
        *("--embedder", "hash", "--allow-forget"),
    ]
    params = StdioServerParameters(command=sys.executable, args=command, cwd=tmp_path)

    async def scenario() -> None:
        with (tmp_path / "mcp.log").open("w") as log:
            transport = stdio_client(params, errlog=log)
            async with Client(transport, read_timeout_seconds=TIMEOUT_S) as client:
                await walk_every_tool(client)

    run(scenario)
    assert (tmp_path / "data" / "journal.sqlite3").exists()  # the memory was on --data-dir


async def walk_every_tool(client: Client) -> None:
    assert await tool_names(client) == {*TOOLS, "forget_user"}
    stored = data(await client.call_tool("remember", {"messages": LISBON, "session_id": "s1"}))
    assert len(stored["turn_ids"]) == 2
    ana = next(m for m in stored["stored"] if "Lisbon" in m["text"])
    assert ana["session_id"] == "s1"
    assert ana["source_turn_ids"][0] == stored["turn_ids"][0]

    hits = data(await client.call_tool("search", {"query": "where does my sister live"}))
    assert hits["hits"][0]["id"] == ana["id"]
    assert set(hits["hits"][0]) == HIT_FIELDS
    ctx = data(await client.call_tool("context", {"question": "Where did Ana move?"}))
    assert "Lisbon" in ctx["text"]
    assert 0 < ctx["tokens"] <= ctx["budget_tokens"] == 1200
    assert ana["id"] in ctx["memory_ids"]

    assert data(await client.call_tool("get", {"memory_id": ana["id"]}))["text"] == ana["text"]
    moved = "user: My sister Ana moved to Porto in June."
    changed = data(await client.call_tool("update", {"memory_id": ana["id"], "text": moved}))
    assert changed["text"] == moved
    events = data(await client.call_tool("history", {"memory_id": ana["id"]}))["events"]
    assert [(e["op"], e["after"]) for e in events] == [("ADD", ana["text"]), ("UPDATE", moved)]
    assert {m["id"] for m in await recent(client)} == {m["id"] for m in stored["stored"]}

    gone = data(await client.call_tool("delete", {"memory_id": ana["id"]}))
    assert gone == {"deleted": ana["id"]}
    assert error_code(await client.call_tool("get", {"memory_id": ana["id"]})) == (
        "memory_not_found"
    )
    erased = data(await client.call_tool("forget_user", {}))
    assert erased["turns"] == 2
    assert await recent(client) == []


@contextmanager
def http_served(memory: Memory, user: str) -> Iterator[str]:
    """The server's streamable HTTP app under uvicorn, on a loopback port of this process."""
    with serve_in_thread(build_server(memory, user).streamable_http_app()) as url:
        yield f"{url}/mcp"


def test_streamable_http_remembers_and_finds(make_memory: MemoryFactory) -> None:
    memory = make_memory()

    async def scenario(url: str) -> None:
        async with Client(url, read_timeout_seconds=TIMEOUT_S) as client:
            assert await tool_names(client) == TOOLS
            stored = data(await client.call_tool("remember", {"messages": PORTO}))
            found = data(await client.call_tool("search", {"query": "cello teacher", "k": 1}))
            assert [h["id"] for h in found["hits"]] == [stored["stored"][0]["id"]]

    with http_served(memory, "maya") as url:
        anyio.run(scenario, url)
    assert [e.text for e in memory.get_all("maya")] == ["user: " + PORTO[0]["content"]]


def test_a_server_reaches_its_own_user_only(make_memory: MemoryFactory) -> None:
    memory = make_memory()
    maya, leo = build_server(memory, "maya"), build_server(memory, "leo")

    async def scenario() -> None:
        async with Client(maya) as as_maya, Client(leo) as as_leo:
            schemas = {t.name: fields(t.input_schema) for t in (await as_leo.list_tools()).tools}
            assert {"messages", "role", "session_id"} <= schemas["remember"]
            for tool, names in schemas.items():  # no way to name another user
                assert not any("user" in name for name in names), tool
            stored = data(await as_maya.call_tool("remember", {"messages": LISBON}))
            mine = stored["stored"][0]["id"]
            found = data(await as_leo.call_tool("search", {"query": "sister Ana Lisbon"}))
            assert found["hits"] == []
            ctx = data(await as_leo.call_tool("context", {"question": "Where does Ana live?"}))
            assert "Lisbon" not in ctx["text"]
            assert ctx["memory_ids"] == []
            calls = [("get", {}), ("history", {}), ("delete", {}), ("update", {"text": "x"})]
            for tool, extra in calls:
                result = await as_leo.call_tool(tool, {"memory_id": mine, **extra})
                assert error_code(result) == "memory_not_found", tool
            assert await recent(as_leo) == []
            still = data(await as_maya.call_tool("get", {"memory_id": mine}))
            assert still["text"] == stored["stored"][0]["text"]  # leo's update changed nothing

    run(scenario)


def test_forget_user_is_offered_only_when_allowed_and_erases_the_bound_user(
    make_memory: MemoryFactory,
) -> None:
    memory = make_memory()
    memory.add(PORTO, user_id="leo")

    async def scenario() -> None:
        async with Client(build_server(memory, "maya")) as plain:
            assert "forget_user" not in await tool_names(plain)
            await plain.call_tool("remember", {"messages": LISBON})
            refused = await plain.call_tool("forget_user", {})
            assert refused.is_error
        async with Client(build_server(memory, "maya", allow_forget=True)) as allowed:
            assert await tool_names(allowed) == {*TOOLS, "forget_user"}
            erased = data(await allowed.call_tool("forget_user", {}))
            assert erased["entries"] >= 1
            assert await recent(allowed) == []

    run(scenario)
    assert memory.get_all("maya") == []
    assert len(memory.get_all("leo")) == 1  # the bound user only


@pytest.mark.parametrize(
    ("memory_id", "code"),
    [
        ("no-such-memory", "memory_not_found"),
        ("", "invalid_memory_id"),
        ("ltm:n:1f", "knowledge_item"),  # shared LTM knowledge is no user's memory
    ],
)
def test_a_bad_memory_id_is_a_typed_tool_error_and_the_server_goes_on(
    make_memory: MemoryFactory, memory_id: str, code: str
) -> None:
    server = build_server(make_memory(), "maya")

    async def scenario() -> None:
        async with Client(server) as client:
            for tool in ("get", "history", "delete"):
                assert error_code(await client.call_tool(tool, {"memory_id": memory_id})) == code
            bad_k = await client.call_tool("search", {"query": "cello", "k": 0})
            assert error_code(bad_k) == "invalid_limit"
            assert bad_k.structured_content == {
                "error": {
                    "code": "invalid_limit",
                    "message": "k must be a positive integer, got 0",
                    "detail": {"name": "k", "value": 0, "maximum": None},
                }
            }
            stored = data(await client.call_tool("remember", {"messages": PORTO}))
            got = data(await client.call_tool("get", {"memory_id": stored["stored"][0]["id"]}))
            assert "cello" in got["text"]

    run(scenario)


def test_search_filters_by_time_and_kind(make_memory: MemoryFactory) -> None:
    server = build_server(make_memory(), "maya")
    dated = [{**PORTO[0], "timestamp": "2026-03-02T09:00:00+00:00"}]

    async def scenario() -> None:
        async with Client(server) as client:
            data(await client.call_tool("remember", {"messages": dated}))
            query = {"query": "cello teacher"}
            assert data(await client.call_tool("search", query))["hits"]
            later = {**query, "since": "2026-03-03T00:00:00+00:00"}
            assert data(await client.call_tool("search", later))["hits"] == []
            facts = {**query, "kinds": ["fact"]}  # model-free: verbatim turns, no facts
            assert data(await client.call_tool("search", facts))["hits"] == []
            bad = await client.call_tool("search", {**query, "since": "March"})
            assert error_code(bad) == "invalid_filter"

    run(scenario)


def test_the_cli_refuses_a_bad_user_on_stderr_and_leaves_stdout_to_the_protocol(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["mcp", "--user", " ", "--data-dir", str(tmp_path), "--embedder", "hash"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "invalid user id" in err
    assert not (tmp_path / "journal.sqlite3").exists()  # refused before anything opened
