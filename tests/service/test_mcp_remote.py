"""``tiermem mcp --remote``: the MCP server over a ``tiermem serve`` service (``RemoteMemory``),
driven by the SDK's own client over stdio, with the service's tenants kept apart."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from tiermem.cli import main
from tiermem.remote import RemoteMemory

from tests.engine.test_mcp import PORTO, TIMEOUT_S, data, walk_every_tool
from tests.service.conftest import Served


def mcp_over(served: Served, key: str, user: str, log: Path) -> StdioServerParameters:
    command = ["-m", "tiermem.cli", "mcp", "--user", user, "--remote", served.url]
    return StdioServerParameters(
        command=sys.executable,
        args=[*command, "--allow-forget"],
        env={**os.environ, "TIERMEM_API_KEY": key},
        cwd=log.parent,
    )


def test_stdio_over_a_service_serves_every_tool_within_its_tenant(
    served: Served, tmp_path: Path
) -> None:
    with RemoteMemory(served.url, served.keys.beta) as beta:
        beta.add(PORTO, "mcp-maya")  # the same user id in another tenant
    params = mcp_over(served, served.keys.acme, "mcp-maya", tmp_path / "mcp.log")

    async def scenario() -> None:
        with (tmp_path / "mcp.log").open("w") as log:
            async with Client(
                stdio_client(params, errlog=log), read_timeout_seconds=TIMEOUT_S
            ) as c:
                found = data(await c.call_tool("search", {"query": "cello teacher in Porto"}))
                assert found["hits"] == []  # beta's maya is not acme's
                await walk_every_tool(c)  # ends by forgetting acme's maya

    anyio.run(scenario)
    with RemoteMemory(served.url, served.keys.beta) as beta:
        kept = beta.search("cello", "mcp-maya")
    assert kept  # forgetting acme's maya left beta's alone
    assert "cello" in kept[0].text


def test_remote_needs_a_key_in_the_environment_and_no_local_memory(
    served: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TIERMEM_API_KEY", raising=False)
    assert main(["mcp", "--user", "maya", "--remote", served.url]) == 2
    assert "needs the service's API key in $TIERMEM_API_KEY" in capsys.readouterr().err
    monkeypatch.setenv("TIERMEM_API_KEY", served.keys.acme)
    assert main(["mcp", "--user", "maya", "--remote", served.url, "--embedder", "hash"]) == 2
    assert "drop --embedder" in capsys.readouterr().err
