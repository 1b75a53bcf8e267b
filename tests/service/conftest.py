"""The service under test: a real uvicorn server on loopback, either in this process (a
thread, over a memory the test also holds: same clock, exact parity) or as ``tiermem serve``
in a child process (the real entry point: config file, keys file, data directory lock)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from tiermem import Memory
from tiermem.service.app import create_app
from tiermem.service.config import ServiceConfig
from tiermem.service.keys import KeyRing, add_key
from tiermem.service.launch import LOOPBACK, ServerProcess, free_port
from tiermem.service.protocol import JSONErrorsH11Protocol

TOML = """data_dir = "{data_dir}"
[embedder]
kind = "hash"
model = "hash-384"
{extra}
[service]
max_body_bytes = {max_body_bytes}
max_k = 50
max_in_flight = 64
shutdown_grace_s = 20
"""
MAX_BODY_BYTES = 256 * 1024


@dataclass(frozen=True)
class Keys:
    """A keys file with three tenants (the fuzzer has its own) and an admin."""

    path: Path
    acme: str
    beta: str
    fuzz: str
    admin: str


def make_keys(root: Path) -> Keys:
    path = root / "keys.json"
    tenants = [add_key(path, name) for name in ("acme", "beta", "fuzz")]
    return Keys(path, *tenants, admin=add_key(path, "ops", admin=True))


def write_config(root: Path, extra: str = "", max_body_bytes: int = MAX_BODY_BYTES) -> Path:
    config = root / "tiermem.toml"
    config.write_text(
        TOML.format(data_dir=root / "data", extra=extra, max_body_bytes=max_body_bytes)
    )
    return config


@contextmanager
def in_thread(memory: Memory, keys: Keys, config: ServiceConfig | None = None) -> Iterator[str]:
    """uvicorn serving ``memory`` on a loopback port from a thread of this process."""
    app = create_app(memory, KeyRing(keys.path), config)
    with serve_in_thread(app, http=JSONErrorsH11Protocol) as url:
        yield url


@contextmanager
def serve_in_thread(app: Any, **options: Any) -> Iterator[str]:
    """uvicorn serving an ASGI ``app`` on a loopback port from a thread of this process:
    its base URL, until the block ends."""
    server = uvicorn.Server(
        uvicorn.Config(app, host=LOOPBACK, port=free_port(), log_level="warning", **options)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://{LOOPBACK}:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(30)


@dataclass(frozen=True)
class Served:
    server: ServerProcess
    keys: Keys
    root: Path

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One ``tiermem serve`` child for the tests that only talk to it (each uses its own
    user ids): on-disk Qdrant, hash embedder, model-free roles."""
    root = tmp_path_factory.mktemp("served")
    keys = make_keys(root)
    server = ServerProcess(write_config(root), keys.path, log_file=root / "serve.log").start()
    try:
        yield Served(server, keys, root)
    finally:
        server.stop()


def raw_request(url: str, key: str, rest: bytes) -> socket.socket:
    """A connection that has sent ``POST /v1/search`` with ``key``'s headers, then ``rest``
    (the last headers and what there is of the body), and is left open."""
    port = int(url.rsplit(":", 1)[1])
    held = socket.create_connection((LOOPBACK, port))
    held.sendall(
        b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + key.encode() + b"\r\n" + rest
    )
    return held
