"""``tiermem inspect DATA_DIR``: the same page and routes over an embedded directory, with the
owner's ids as stored, and read-only: every write route refused, the store itself refusing
writes, and no retrieval counted, so the directory is the same after the inspection."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import pytest
from tiermem import Memory, TiermemConfig
from tiermem.errors import DataDirLockedError, PermissionDeniedError
from tiermem.ownership import claim_data_dir
from tiermem.service.app import create_app
from tiermem.service.embedded import inspect_config
from tiermem.service.keys import OneKey, Tenant
from tiermem.service.launch import free_port
from tiermem.service.readonly import ReadOnlyStore
from tiermem.service.tenancy import OWNER
from tiermem.stores.base import Retrievals

from tests.service.conftest import serve_in_thread
from tests.service.test_inspect import ingest_demo

WRITES = [
    ("POST", "/v1/memories", {"messages": "I moved to Porto.", "user_id": "maya"}),
    ("PATCH", "/v1/memories/{id}", {"text": "overwritten", "user_id": "maya"}),
    ("DELETE", "/v1/memories/{id}?user_id=maya", None),
    ("DELETE", "/v1/users/maya", None),
    ("POST", "/v1/consolidation/run", {"user_id": "maya"}),
]


def test_a_read_only_app_refuses_every_write_and_serves_ids_as_stored() -> None:
    with Memory(TiermemConfig.for_tests()) as memory:
        ingest_demo(memory)
        entries = memory.get_all("maya")
        key = OneKey(Tenant(OWNER))
        app = create_app(memory, key, read_only=True)
        with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as http:
            http.headers["Authorization"] = f"Bearer {key.key}"
            for method, path, body in WRITES:
                answer = http.request(method, path.format(id=entries[0].id), json=body)
                assert answer.status_code == 403, (method, path, answer.text)
                assert "read-only" in answer.json()["error"]["message"]
            info = http.get("/v1/inspect/users").json()
            listed = http.get("/v1/memories", params={"user_id": "maya"}).json()
        assert memory.get_all("maya") == entries
    assert info == {"tenant": "", "admin": False, "read_only": True, "ltm": False,
                    "users": ["leo", "maya"]}  # fmt: skip
    assert [e["id"] for e in listed] == [e.id for e in entries]


def test_the_read_only_store_refuses_writes_and_counts_no_retrieval() -> None:
    with Memory(TiermemConfig.for_tests()) as memory:
        memory.add("I keep bees on the roof.", user_id="ana")
        store = ReadOnlyStore(memory.components.store)
        entry = memory.get_all("ana")[0]
        now = datetime.now(UTC)
        vector = np.zeros((1, store.dim), dtype=np.float32)
        for write in (
            lambda: store.upsert("ana", [entry], vector),
            lambda: store.set_superseded("ana", {entry.id: None}),
            lambda: store.delete("ana", [entry.id]),
            lambda: store.drop_user("ana"),
            lambda: store.replace_user("ana", [entry], vector),
            store.check_writable,
        ):
            with pytest.raises(PermissionDeniedError, match="read-only"):
                write()
        assert store.record_access("ana", {entry.id: Retrievals(3, now)}) == {}
        assert store.get("ana", [entry.id]) == [entry]
        assert store.count("ana") == 1


def test_inspect_refuses_a_directory_that_is_not_there(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tiermem.cli", "inspect", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "no data directory" in done.stdout
    assert not (tmp_path / "nowhere").exists()


def _snapshot(config: TiermemConfig) -> list[tuple[str, str, int]]:
    with Memory(config) as memory:
        return [
            (e.id, e.text, e.access_count)
            for user in ("maya", "leo")
            for e in memory.get_all(user, None)
        ]


@pytest.fixture
def demo_dir(tmp_path: Path) -> Path:
    data_dir = tmp_path / "memory"
    data_dir.mkdir()
    with Memory(inspect_config(data_dir, None, "hash", os.environ)) as memory:
        ingest_demo(memory)
    return data_dir


def _url_of(process: subprocess.Popen[str], timeout_s: float = 120) -> str:
    """The page's address, the line ``tiermem inspect`` prints once it serves."""
    found: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if "#key=" in line:
                found.put(line.strip())
        found.put("")  # the process ended

    threading.Thread(target=read, daemon=True).start()
    url = found.get(timeout=timeout_s)
    assert url, "tiermem inspect exited before it served"
    return url


@pytest.mark.slow
def test_tiermem_inspect_serves_the_directory_read_only(demo_dir: Path) -> None:
    config = inspect_config(demo_dir, None, "hash", os.environ)
    before = _snapshot(config)
    port = free_port()
    command = [sys.executable, "-m", "tiermem.cli", "inspect", str(demo_dir)]
    process = subprocess.Popen(
        [*command, "--embedder", "hash", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = _url_of(process)
        base, _, key = url.partition("/inspect#key=")
        assert base == f"http://127.0.0.1:{port}"
        with pytest.raises(DataDirLockedError):  # no service, nor a second writer, beside it
            claim_data_dir(demo_dir)
        with httpx.Client(base_url=base, timeout=60) as http:
            assert http.get("/inspect").status_code == 200
            assert http.get("/v1/inspect/users").status_code == 401
            http.headers["Authorization"] = f"Bearer {key}"
            info = http.get("/v1/inspect/users").json()
            question = {"query": "When is my flight?", "user_id": "maya"}
            traced = http.post("/v1/inspect/context", json=question).json()
            answered = http.post("/v1/answer", json=question)  # counts, but nothing is written
            erased = http.delete("/v1/users/maya")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    assert process.returncode in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it got
    assert (info["read_only"], info["users"]) == (True, ["leo", "maya"])
    assert "9 October" in traced["context"]["text"]
    assert "9 October" in answered.json()["text"]
    assert erased.status_code == 403
    assert _snapshot(config) == before  # the same entries, the same retrieval counts
